"""Frozen records that cost little at start-up.

`@record` is `@dataclass(frozen=True)` (and `@record(slots=True)` is `@dataclass(frozen=True, slots=True)`)
with the same fields, defaults, equality, hashing, repr and immutability, but its methods are shared
functions instead of generated source: Python 3.11's dataclass decorator compiles six small functions per
class (`exec` in dataclasses._create_fn) and, for a class without a docstring, computes its signature.
Everything the dataclasses module offers (fields, replace, asdict, is_dataclass) works."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def record(cls: T | None = None, /, *, slots: bool = False) -> Any:
    """Decorator: a frozen dataclass without generated code."""

    def wrap(c: T) -> T:
        if not c.__doc__:  # else dataclasses computes a signature for the docstring
            c.__doc__ = c.__name__
        return _build(dataclasses.dataclass(c, init=False, repr=False, eq=False, slots=slots))

    return wrap if cls is None else wrap(cls)


def _build(cls: Any) -> Any:
    fs = dataclasses.fields(cls)
    names = tuple(f.name for f in fs)
    known = frozenset(names)
    factories: dict[str, Callable[[], Any]] = {f.name: f.default_factory for f in fs  # type: ignore[misc]
                                               if f.default_factory is not MISSING}
    compared = tuple(f.name for f in fs if f.compare)
    hashed = tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fs if f.repr)
    post_init = getattr(cls, "__post_init__", None)
    set_ = object.__setattr__
    label = cls.__qualname__

    spec = tuple((f.name, f.default, factories.get(f.name)) for f in fs)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > len(names):
                raise TypeError(f"{label}() takes {len(names)} positional arguments but {len(args)} were "
                                "given")
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{label}() got multiple values for argument '{name}'")
                kwargs[name] = value
        if not kwargs.keys() <= known:
            key = next(k for k in kwargs if k not in known)
            raise TypeError(f"{label}() got an unexpected keyword argument '{key}'")
        get = kwargs.get
        for name, default, factory in spec:
            value = get(name, default)
            if value is MISSING:
                if factory is None:
                    raise TypeError(f"{label}() missing required argument: '{name}'")
                value = factory()
            set_(self, name, value)
        if post_init is not None:
            post_init(self)

    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    compare_key = _key(compared)
    hash_key = _key(hashed)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return compare_key(self) == compare_key(other)

    def __hash__(self: Any) -> int:
        return hash(hash_key(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in known:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in known:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    def __getstate__(self: Any) -> list[Any]:  # copy and pickle of slotted records
        return [getattr(self, n) for n in names]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for n, v in zip(names, state, strict=True):
            set_(self, n, v)

    methods: dict[str, Any] = {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__,
                               "__hash__": __hash__, "__setattr__": __setattr__, "__delattr__": __delattr__}
    if "__slots__" in cls.__dict__:
        methods |= {"__getstate__": __getstate__, "__setstate__": __setstate__}
    for name, fn in methods.items():
        if name in ("__repr__", "__eq__", "__hash__") and name in cls.__dict__:
            continue  # the class defines its own
        fn.__qualname__ = f"{label}.{name}"
        setattr(cls, name, fn)
    return cls


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of `names` as a tuple (operator.attrgetter, in C)."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()
