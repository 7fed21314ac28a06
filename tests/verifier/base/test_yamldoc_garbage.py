"""verifier/base/_yamldoc.py: reading leaves no cyclic garbage, so each document's node tree is freed as soon
as the document is built (``check`` reads with the cycle collector off and sets aside what it read: a tree
kept alive by a cycle was freed only at exit, 0.1 M instructions a resource)."""

from __future__ import annotations

import gc

import pytest

from verifier.base._errors import InputError
from verifier.base._yamldoc import load_documents, load_each_document

STREAM = "a: [1, 2, {b: c}]\nd: &x e\nf: *x\n---\n- g\n- {h: [i, j]}\n---\nk: 1.5\n"


@pytest.mark.usefixtures("collector_off")
def test_reading_a_stream_leaves_nothing_for_the_collector() -> None:
    documents = list(load_documents(STREAM, "s.yaml"))
    assert [d.data for d in documents][1] == ["g", {"h": ["i", "j"]}]
    assert gc.collect() == 0


@pytest.mark.usefixtures("collector_off")
def test_reading_documents_one_by_one_leaves_nothing_for_the_collector() -> None:
    found = list(load_each_document(STREAM + "---\n[unclosed\n", "s.yaml"))
    gc.collect()  # a malformed stream raised (its traceback is garbage), and was read document by document
    assert [type(f) for f in found][-1] is InputError
    found = list(load_each_document(STREAM, "s.yaml"))
    assert len(found) == 3
    assert gc.collect() == 0
