"""verifier.base._frozen: the quick ``__init__`` against the one dataclasses wrote, for each class with it."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.engines import EngineSort
from policies.evaluation._state import EngineSubject, ImageSubject, VerifiedBuild, WorkloadSubject
from policies.results import ArtifactRecord, Decision
from policies.rules._findings import Refusal
from policies.workload_model import extract
from policies.workload_model._extraction import Workload
from policies.workload_model._pods import Container, EngineUse, ImageUse, PodTemplate, SameImage
from policies.workload_model._podspec import Candidate
from policies.workload_model._scheduling import NodeSelection, NodeTerm
from policies.workload_model._sharing import _Volume
from verifier.base._frozen import quick_init


@quick_init
@dataclass(frozen=True, slots=True)
class _Sample:
    """Every kind of field the quick ``__init__`` handles."""

    a: int
    b: object = None
    c: list[int] = field(default_factory=list)
    d: int = field(default=7, init=False)
    e: list[int] = field(default_factory=lambda: [1], init=False)
    f: int = field(default=3, kw_only=True)
    g: object = field(default=None, kw_only=True, compare=False)


@quick_init
@dataclass(frozen=True, slots=True)
class _Posted:
    x: int
    y: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "y", self.x * 2)


# Workload and NodeTerm check their fields in __post_init__: they are built from ones that pass, below.
SIMPLE: list[type[Any]] = [
    ArtifactRecord,
    Decision,
    ImageSubject,
    EngineSubject,
    WorkloadSubject,
    VerifiedBuild,
    ImageUse,
    Container,
    EngineUse,
    PodTemplate,
    SameImage,
    EngineSort,
    Refusal,
    Candidate,
    NodeSelection,
    _Volume,
    _Sample,
]

_values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.tuples(st.integers()), st.booleans())


def _general(cls: type[Any], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """``cls(*args, **kwargs)`` built by the ``__init__`` dataclasses wrote."""
    built = object.__new__(cls)
    cls.__init__.__wrapped__(built, *args, **kwargs)
    return built


def _state(obj: object) -> dict[str, object]:
    """Every field of ``obj``, set or not (a field no ``__init__`` set reads as the exception it raises)."""
    found: dict[str, object] = {}
    for each in dataclasses.fields(obj):  # type: ignore[arg-type]
        try:
            found[each.name] = getattr(obj, each.name)
        except AttributeError as error:
            found[each.name] = repr(error)
    return found


def _same(cls: type[Any], args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    try:
        quick: object = cls(*args, **kwargs)
    except TypeError as error:
        with pytest.raises(TypeError) as general_error:
            _general(cls, args, kwargs)
        assert str(error).split("(")[-1] == str(general_error.value).split("(")[-1]
        return
    general = _general(cls, args, kwargs)
    assert type(quick) is type(general) is cls
    assert _state(quick) == _state(general)
    assert quick == general and repr(quick) == repr(general)
    assert _hash(quick) == _hash(general)


def _hash(obj: object) -> object:
    try:
        return hash(obj)
    except TypeError as error:  # a field holds a list
        return str(error)


@pytest.mark.parametrize("cls", [*SIMPLE, Workload, NodeTerm, _Posted])
def test_the_quick_init_takes_the_parameters_of_the_general_one(cls: type[Any]) -> None:
    quick, general = cls.__init__, cls.__init__.__wrapped__
    assert str(inspect.signature(quick, follow_wrapped=False)) == str(inspect.signature(general))
    assert quick.__qualname__ == general.__qualname__


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SIMPLE), st.data())
def test_the_quick_init_builds_what_the_general_one_builds(cls: type[Any], data: st.DataObject) -> None:
    parameters = list(inspect.signature(cls.__init__.__wrapped__).parameters.values())[1:]
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for parameter in parameters:
        required = parameter.default is inspect.Parameter.empty
        if not required and not data.draw(st.booleans(), label=f"give {parameter.name}"):
            continue
        value = data.draw(_values, label=parameter.name)
        positional = parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        if positional and not kwargs and data.draw(st.booleans(), label=f"{parameter.name} by position"):
            args.append(value)
        else:
            kwargs[parameter.name] = value
    if data.draw(st.booleans(), label="a wrong call"):
        kwargs[data.draw(st.sampled_from(["nope", *(p.name for p in parameters)]))] = 0
        args.extend(data.draw(st.lists(_values, max_size=2)))
    _same(cls, tuple(args), kwargs)


def test_defaults_factories_and_post_init_as_dataclasses_has_them() -> None:
    one, two = _Sample(1), _Sample(1)
    assert one.c == [] and one.c is not two.c and one.d == 7 and one.e == [1] and one.e is not two.e
    assert (one.b, one.f, one.g) == (None, 3, None)
    assert _Sample(1, 2, [3], f=4, g=5) == _Sample(1, 2, [3], f=4, g=6)
    assert _Posted(4).y == 8 and _Posted(4) == _general(_Posted, (4,), {})
    with pytest.raises(TypeError):
        _Sample(1, 2, [3], 4)  # type: ignore[call-arg]  # f is keyword-only


def test_the_classes_stay_frozen_and_copy_as_before() -> None:
    record = ArtifactRecord("nginx", None, "spec.containers[0].image", container="app")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.digest = "sha256:" + "0" * 64  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del record.path
    pinned = dataclasses.replace(record, digest="sha256:" + "1" * 64)
    assert pinned.digest == "sha256:" + "1" * 64 and pinned.container == "app"
    unpickled = pickle.loads(pickle.dumps(pinned))  # noqa: S301 - the pickle this test just wrote
    assert unpickled == pinned == copy.deepcopy(pinned) == copy.copy(pinned)


ENGINES = "e=reg.io/e@sha256:" + "2" * 64
_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "app",
        "namespace": "team",
        "annotations": {"trtguard.dev/engines": "e=reg.io/e@sha256:" + "2" * 64},
    },
    "spec": {
        "template": {
            "spec": {
                "nodeSelector": {"gpu": "h100"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["a", "b"]}
                                    ]
                                },
                                {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                            ]
                        }
                    }
                },
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [
                    {
                        "name": "app",
                        "image": "reg.io/team/app:1",
                        "volumeMounts": [{"name": "m", "mountPath": "/m"}],
                    },
                    {"name": "side", "image": "reg.io/team/app:1"},
                ],
                "volumes": [{"name": "m", "image": {"reference": "reg.io/models/m@sha256:" + "1" * 64}}],
            }
        }
    },
}


def _reachable(value: object, found: list[object]) -> None:
    """Every dataclass instance reachable from ``value`` through fields, tuples, lists and dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if any(value is seen for seen in found):
            return
        found.append(value)
        for each in dataclasses.fields(value):
            _reachable(getattr(value, each.name, None), found)
    elif isinstance(value, tuple | list):
        for item in value:
            _reachable(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _reachable(item, found)


def test_a_read_workload_is_rebuilt_the_same_by_either_init() -> None:
    workload = extract(_DEPLOYMENT, namespace="team")
    assert isinstance(workload, Workload)
    found: list[object] = []
    _reachable(workload, found)
    quick = [obj for obj in found if hasattr(type(obj).__init__, "__wrapped__")]
    assert {type(obj) for obj in quick} >= {Workload, NodeTerm, PodTemplate, Container, ImageUse}
    for obj in quick:
        cls = type(obj)
        given_ = {each.name: getattr(obj, each.name) for each in dataclasses.fields(obj) if each.init}  # type: ignore[arg-type]
        rebuilt, general = cls(**given_), _general(cls, (), given_)
        assert _state(rebuilt) == _state(general) == _state(obj)
        assert rebuilt == general == obj


def test_classes_it_cannot_serve_are_refused() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int]

        def __post_init__(self, b: int) -> None:
            pass

    for cls in (NoSlots, NotFrozen, WithInitVar):
        with pytest.raises(TypeError):
            quick_init(cls)
