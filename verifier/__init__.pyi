from .evidence_choice import evidence_source as evidence_source
