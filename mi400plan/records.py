"""``@record``: a dataclass whose methods are written once, here, instead of compiled for each class.

``dataclasses.dataclass`` (before Python 3.13) writes each class's ``__init__``, ``__repr__``, ``__eq__``
and, when frozen, ``__hash__``, ``__setattr__`` and ``__delattr__`` as source text and compiles every one
with ``exec``: about 0.5 ms a frozen class on the development machine, some 20 ms of a sweep's start-up
for the forty-odd records it imports. ``record`` has ``dataclass`` collect the fields (``dataclasses.fields``,
``replace``, ``asdict`` and ``is_dataclass`` work as before) and gives the class the same methods as
closures over its field names: the same positional and keyword arguments, defaults and default
factories, ``__post_init__``; equality and hash over the compared fields (the same tuple, so the same
hash); the same repr; ``FrozenInstanceError`` on assignment or deletion. ``record(frozen=False)`` is a
plain ``@dataclass``. A class that needs what these do not cover (``InitVar``, ``ClassVar``,
``init=False`` or keyword-only fields, its own ``__init__``, ``__eq__``, ``__repr__``, ``__hash__``,
``__setattr__`` or ``__delattr__``) is refused when it is defined: keep ``dataclass`` for it.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))  # type checkers read it as dataclass
def record(cls: type[T] | None = None, *, frozen: bool = True) -> Any:
    """``@dataclass(frozen=True)`` (or with ``frozen=False``, ``@dataclass``), its methods shared."""
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def _make(cls: type[T], frozen: bool) -> type[T]:
    own = [name for name in _OWN if name in cls.__dict__]
    if own:
        raise TypeError(f"{cls.__qualname__} defines {', '.join(own)}: use dataclasses.dataclass")
    cls = dataclass(init=False, repr=False, eq=False)(cls)
    flds = fields(cls)  # type: ignore[arg-type]
    declared = cls.__dataclass_fields__  # type: ignore[attr-defined]  # with any ClassVar and InitVar pseudo-fields
    if len(flds) != len(declared) or any(not f.init or f.kw_only for f in flds):
        raise TypeError(f"{cls.__qualname__} has InitVar, ClassVar, init=False or keyword-only fields: "
                        "use dataclasses.dataclass")
    cls.__init__ = _init(cls, flds)  # type: ignore[misc]
    cls.__repr__ = _repr(cls, tuple(f.name for f in flds if f.repr))  # type: ignore[assignment,method-assign]
    compared = tuple(f.name for f in flds if f.compare)
    cls.__eq__ = _eq(cls, compared)  # type: ignore[assignment,method-assign]
    if frozen:
        hashed = tuple(f.name for f in flds if f.hash or (f.hash is None and f.compare))
        cls.__hash__ = _hash(cls, hashed)  # type: ignore[assignment,method-assign]
        names = frozenset(f.name for f in flds)
        cls.__setattr__ = _frozen_setattr(cls, names)  # type: ignore[assignment,method-assign]
        cls.__delattr__ = _frozen_delattr(cls, names)  # type: ignore[assignment,method-assign]
    else:
        cls.__hash__ = None  # type: ignore[assignment]  # as dataclass does for an unfrozen class with __eq__
    return cls


def _named(cls: type, fn: Callable[..., Any]) -> Callable[..., Any]:
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    return fn


def _init(cls: type, flds: tuple[Field[Any], ...]) -> Callable[..., None]:
    names = tuple(f.name for f in flds)
    n = len(names)
    fill: dict[str, tuple[bool, Any]] = {}  # name -> (is a factory, default or factory)
    for f in flds:
        if f.default is not MISSING:
            fill[f.name] = (False, f.default)
        elif f.default_factory is not MISSING:
            fill[f.name] = (True, f.default_factory)
    post_init = hasattr(cls, "__post_init__")
    where = f"{cls.__qualname__}.__init__()"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > n:
            raise TypeError(f"{where} takes {n + 1} positional arguments but {len(args) + 1} were given")
        values = self.__dict__  # what the generated __init__ sets through object.__setattr__
        for name, value in zip(names, args):
            values[name] = value
        for name in names[len(args):]:
            if name in kwargs:
                values[name] = kwargs.pop(name)
            elif name in fill:
                factory, value = fill[name]
                values[name] = value() if factory else value
            else:
                raise TypeError(f"{where} missing required argument: '{name}'")
        if kwargs:
            name = next(iter(kwargs))
            raise TypeError(f"{where} got multiple values for argument '{name}'" if name in names
                            else f"{where} got an unexpected keyword argument '{name}'")
        if post_init:
            self.__post_init__()

    return _named(cls, __init__)


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple ``(obj.<name>, ...)`` that the generated ``__eq__`` and ``__hash__`` build."""
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names) if names else (lambda obj: ())


def _repr(cls: type, names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    return _named(cls, __repr__)


def _eq(cls: type, names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    values = _values(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return _named(cls, __eq__)


def _hash(cls: type, names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return _named(cls, __hash__)


def _frozen_setattr(cls: type, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return _named(cls, __setattr__)


def _frozen_delattr(cls: type, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return _named(cls, __delattr__)
