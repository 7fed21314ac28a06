"""The trtguard policy language: schema, loader, evaluator, workload extraction and policy tests."""
