"""policies.patterns: globs over normalised references; patterns that cannot mean what they say."""

from __future__ import annotations

import pytest

from policies.patterns import ImagePattern, PatternError
from verifier.base._references import ImageReference

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("pattern", "reference", "expected"),
    [
        ("nvcr.io/nvidia/tensorrt:*", "nvcr.io/nvidia/tensorrt:24.05-py3", True),
        ("nvcr.io/nvidia/tensorrt:*", f"nvcr.io/nvidia/tensorrt@{DIGEST}", True),  # :* admits digest-only
        ("nvcr.io/nvidia/tensorrt:24.*", f"nvcr.io/nvidia/tensorrt@{DIGEST}", False),
        ("nvcr.io/nvidia/tensorrt:24.*", f"nvcr.io/nvidia/tensorrt:24.05@{DIGEST}", True),
        ("nvcr.io/nvidia/tensorrt", "nvcr.io/nvidia/tensorrt:anything", True),
        ("nvcr.io/nvidia/tensorrt", "nvcr.io/nvidia/tensorrt-evil:1", False),
        ("registry.corp/inference/*", "registry.corp/inference/a/b:1", True),
        ("registry.corp/inference/*", "registry.corp/inferencex/a:1", False),
        ("docker.io/library/nginx:*", "nginx", True),
        ("docker.io/library/nginx:*", "index.docker.io/library/nginx:1", True),
        ("localhost:5000/*", "localhost:5000/team/app:1", True),
        (f"nvcr.io/nvidia/tensorrt@{DIGEST}", f"nvcr.io/nvidia/tensorrt:1@{DIGEST}", True),
        (f"nvcr.io/nvidia/tensorrt@{DIGEST}", "nvcr.io/nvidia/tensorrt:1", False),
        ("*", "quay.io/x/y:1", True),
        ("*.io/*", "quay.io/x/y:1", True),
        # a wildcard in the host stops at the first "/": no registry can pose as a subdomain
        ("*.example.com/app:*", "registry.example.com/app:1", True),
        ("*.example.com/app:*", "evil.io/x.example.com/app:1", False),
        ("docker.io/*", "nginx:1", True),
    ],
)
def test_matching(pattern: str, reference: str, expected: bool) -> None:
    assert ImagePattern.compile(pattern).matches(ImageReference.parse(reference)) is expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("nginx:*", "not normalised"),
        ("library/nginx", "does not start with a registry host"),
        ("NVCR.io/nvidia/tensorrt", "upper-case"),
        (" nvcr.io/x", "ASCII"),
        ("nvcr.io/nvidia/tеnsorrt", "ASCII"),
        ("", "non-empty"),
        ("bad_host.io/x", "invalid registry host"),
        ("docker.io/nginx:*", "docker.io/library/<name>"),
        ("index.docker.io/library/nginx:*", "docker.io/library/<name>"),
        ("nvcr.io/nvidia/tensorrt:", "empty tag or digest"),
        ("nvcr.io/nvidia/tensorrt@", "empty tag or digest"),
    ],
)
def test_patterns_that_would_silently_never_match_are_refused(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError, match=reason):
        ImagePattern.compile(pattern)
