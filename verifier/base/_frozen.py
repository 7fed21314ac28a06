"""A cheaper ``__init__`` for the frozen dataclasses that every admission builds by the dozen.

A frozen dataclass's ``__init__`` sets each field with ``object.__setattr__(self, name, value)``, which
looks the attribute up on the type and goes through the generic setter: about twice what setting the slot
itself costs, for every field of every record, subject and use an evaluation builds. :func:`quick_init`
gives a frozen, slotted dataclass an ``__init__`` with the same signature and the same effect (defaults,
default factories, fields left out of ``__init__``, ``__post_init__``) that sets each slot through its
member descriptor instead. The class stays frozen (its ``__setattr__`` and ``__delattr__`` are untouched)
and compares, hashes, prints and copies as before. The ``__init__`` dataclasses wrote is kept as
``__init__.__wrapped__``, so that tests can hold the two against each other.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Final, TypeVar

__all__ = ["quick_init"]

_T = TypeVar("_T")


class _Factory:
    """Stands for a parameter left out whose field has a default factory (called in the body)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Final = _Factory()


def quick_init(cls: type[_T]) -> type[_T]:
    """Give the frozen, slotted dataclass ``cls`` an ``__init__`` that sets its slots directly.

    Apply it above ``@dataclass(frozen=True, slots=True)``. Raises TypeError for a class it cannot serve
    the same (not frozen, no slots, or an ``__init__`` whose parameters are not the init fields, such as one
    with ``InitVar`` pseudo-fields).
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__} is not a frozen dataclass with slots and a generated __init__")
    original: Callable[..., None] = cls.__init__
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    expected = [name for name in inspect.signature(original).parameters if name != "self"]
    if [field.name for field in fields if field.init] != [*_positional(fields), *_keyword(fields)]:
        raise TypeError(f"{cls.__qualname__}: keyword-only fields out of order are not supported")
    if [*_positional(fields), *_keyword(fields)] != expected:
        raise TypeError(f"{cls.__qualname__}.__init__ takes parameters that are not its init fields")
    scope: dict[str, Any] = {"_FACTORY": _FACTORY}
    signature: list[str] = []
    body: list[str] = []
    for field in fields:
        name = field.name
        scope[f"_set_{name}"] = _slot(cls, name).__set__
        if field.default is not dataclasses.MISSING:
            scope[f"_default_{name}"] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{name}"] = field.default_factory
        if field.init:
            if field.kw_only and "*" not in signature:
                signature.append("*")
            if field.default is not dataclasses.MISSING:
                signature.append(f"{name}=_default_{name}")
            elif field.default_factory is not dataclasses.MISSING:
                signature.append(f"{name}=_FACTORY")
                body.append(f"    if {name} is _FACTORY: {name} = _factory_{name}()")
            else:
                signature.append(name)
            body.append(f"    _set_{name}(self, {name})")
        elif field.default is not dataclasses.MISSING:
            body.append(f"    _set_{name}(self, _default_{name})")
        elif field.default_factory is not dataclasses.MISSING:
            body.append(f"    _set_{name}(self, _factory_{name}())")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(signature)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, scope)  # noqa: S102 - the source is built from the class's own field names
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(getattr(original, "__annotations__", {}))
    init.__wrapped__ = original
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _positional(fields: tuple[dataclasses.Field[Any], ...]) -> list[str]:
    return [field.name for field in fields if field.init and not field.kw_only]


def _keyword(fields: tuple[dataclasses.Field[Any], ...]) -> list[str]:
    return [field.name for field in fields if field.init and field.kw_only]


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of the slot ``name`` (on ``cls`` or the class above it that declares it)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None and inspect.ismemberdescriptor(found):
            return found
    raise TypeError(f"{cls.__qualname__}.{name} is not a slot")
