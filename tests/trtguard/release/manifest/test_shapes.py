"""trtguard.release.manifest._shapes: shape ranges in the forms build pipelines write, read or refused."""

from __future__ import annotations

from typing import Any

import pytest

from trtguard.release.manifest._shapes import profile_from_shapes

RANGES = {"min": [1, 3, 224, 224], "opt": [8, 3, 224, 224], "max": [32, 3, 224, 224]}


@pytest.mark.parametrize(
    "shapes",
    [
        {"images": RANGES},
        {"images": {"min": "1x3x224x224", "opt": " 8x3x224x224 ", "max": "32x3x224x224"}},
        {"images": [RANGES["min"], "8x3x224x224", RANGES["max"]]},
        {
            "minShapes": "images:1x3x224x224",
            "optShapes": "images:8x3x224x224",
            "maxShapes": "images:32x3x224x224",
        },
        {
            "min_shapes": "images:1x3x224x224",
            "opt_shapes": "images:8x3x224x224",
            "max_shapes": "images:32x3x224x224",
        },
    ],
)
def test_each_known_form_reads_as_one_profile(shapes: Any) -> None:
    assert profile_from_shapes(shapes) == {"images": RANGES}


def test_trtexec_strings_with_several_inputs_and_colons_in_names() -> None:
    shapes = {
        "minShapes": "input_ids:1x16, attention:mask:1x16",
        "optShapes": "input_ids:4x128,attention:mask:4x128",
        "maxShapes": "input_ids:8x512,attention:mask:8x512",
    }
    assert profile_from_shapes(shapes) == {
        "input_ids": {"min": [1, 16], "opt": [4, 128], "max": [8, 512]},
        "attention:mask": {"min": [1, 16], "opt": [4, 128], "max": [8, 512]},
    }


@pytest.mark.parametrize(
    "shapes",
    [
        None,
        {},
        [RANGES],
        {"images": {"min": [1], "max": [2]}},
        {"images": {"min": [1], "opt": [1], "max": [True]}},
        {"images": [[1], [2]]},
        {"images": {"min": "1x3x", "opt": "1", "max": "1"}},
        # an input whose range trtexec strings give only in part
        {"minShapes": "a:1,b:1", "optShapes": "a:2", "maxShapes": "a:4"},
        {"minShapes": "a:1", "optShapes": "a:2", "maxShapes": "a:4", "extra": 1},
        {"minShapes": ":1", "optShapes": "a:2", "maxShapes": "a:4"},
    ],
)
def test_anything_else_is_not_read(shapes: Any) -> None:
    assert profile_from_shapes(shapes) is None
