"""Micro-benchmark: workload extraction and reference parsing on the admission hot path.

Extracts a 3-container + 1-engine Pod and the same pod template in a Deployment, 10,000 times each, and
prints the per-call median and p99 in microseconds. The baseline, measured in the same run, is the least
any extractor must do: a bare loop that reads the three image strings with no checks and no paths.

    .venv/bin/python bench/workload_extract.py [--iterations N]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from policies.workload_model._extraction import ENGINES_ANNOTATION, Workload, extract
from verifier.base._references import (  # _parse.__wrapped__: the parser without its cache
    ImageReference,
    _parse,
)

#: Stop a measurement early if it runs longer than this, so the benchmark is bounded on a loaded machine.
TIME_LIMIT_S = 60.0

ENGINE = "registry.corp/models/detector-engine@sha256:" + "4" * 64
IMAGES = [
    "nvcr.io/nvidia/tritonserver:24.08-py3@sha256:" + "2" * 64,
    "registry.corp/inference/tokenizer:1.4",
    "registry.corp/inference/metrics@sha256:" + "3" * 64,
]


def pod_spec() -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "triton",
                "image": IMAGES[0],
                "args": ["--model-repository=/models"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "volumeMounts": [{"name": "engine", "mountPath": "/models", "readOnly": True}],
            },
            {"name": "tokenizer", "image": IMAGES[1], "ports": [{"containerPort": 8080}]},
            {"name": "metrics", "image": IMAGES[2]},
        ],
        "volumes": [
            {"name": "engine", "image": {"reference": ENGINE, "pullPolicy": "IfNotPresent"}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "detector-7c9d-x2k4",
            "namespace": "prod-inference",
            "labels": {"app": "detector", "tier": "gpu"},
            "annotations": {
                ENGINES_ANNOTATION: json.dumps([{"name": "engine", "container": "triton"}]),
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": pod_spec()}),
            },
        },
        "spec": pod_spec(),
    }


def deployment() -> dict[str, Any]:
    template = pod()
    del template["metadata"]["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "detector", "namespace": "prod-inference", "labels": {"app": "detector"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "detector"}}, "template": template},
    }


def measure(label: str, call: Callable[[], object], iterations: int) -> float:
    """Time ``call`` once per iteration; print median and p99 in µs; return the median."""
    for _ in range(min(1000, iterations)):  # warm-up: caches, branch predictors, lazy imports
        call()
    samples: list[int] = []
    gc.disable()  # collections would land on random samples and smear the p99
    try:
        started = time.perf_counter()
        for _ in range(iterations):
            begin = time.perf_counter_ns()
            call()
            samples.append(time.perf_counter_ns() - begin)
            if time.perf_counter() - started > TIME_LIMIT_S:
                break
    finally:
        gc.enable()
    samples.sort()
    median = statistics.median(samples) / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    print(f"{label:<52} n={len(samples):>6}  median {median:8.2f} µs   p99 {p99:8.2f} µs")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10_000)
    iterations = parser.parse_args().iterations

    the_pod, the_deployment = pod(), deployment()
    for obj in (the_pod, the_deployment):
        workload = extract(obj)
        assert isinstance(workload, Workload)
        assert len(workload.images) == 4 and len(workload.engines) == 1 and not workload.problems

    def bare_loop() -> list[str]:
        return [container["image"] for container in the_pod["spec"]["containers"]]

    references = [*IMAGES, ENGINE]

    baseline = measure("baseline: bare loop over 3 image strings", bare_loop, iterations)
    pod_median = measure("extract(Pod): 3 containers + 1 engine volume", lambda: extract(the_pod), iterations)
    deployment_median = measure(
        "extract(Deployment): same pod template", lambda: extract(the_deployment), iterations
    )
    measure(
        "ImageReference.parse x4, cache hit",
        lambda: [ImageReference.parse(text) for text in references],
        iterations,
    )
    measure(
        "ImageReference.parse x4, no cache",
        lambda: [_parse.__wrapped__(text) for text in references],
        iterations,
    )
    print(
        f"extract / baseline: Pod {pod_median / baseline:.1f}x, "
        f"Deployment {deployment_median / baseline:.1f}x"
    )


if __name__ == "__main__":
    main()
