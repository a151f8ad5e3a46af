"""Frozen records that cost little at start-up.

`@record` is `@dataclass(frozen=True)` (and `@record(slots=True)` is `@dataclass(frozen=True, slots=True)`)
with the same fields, defaults, equality, hashing, repr and immutability, but its methods are shared
functions instead of generated source: Python 3.11's dataclass decorator compiles six small functions per
class (`exec` in dataclasses._create_fn) and, for a class without a docstring, computes its signature.
Everything the dataclasses module offers (fields, replace, asdict, is_dataclass) works.

A class built often (a tensor group per layer, a memory estimate per model × quantization × context) gets a
compiled `__init__` after its first HOT instances: the shared one loops over the fields in Python (~3x slower
per instance); compiling costs ~0.2 ms once, which a command that builds a few records never pays."""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar


def _import_dataclasses() -> Any:
    """`import dataclasses` without importing `inspect` with it: on Python 3.11 inspect (with ast, dis and
    tokenize) is ~35 M instructions, a quarter of the imports of `cardfit plan`, and dataclasses reads it only
    to write the signature of a `@dataclass` without a docstring (dataclasses.py `_process_class`), which no
    record is. While dataclasses is imported, `inspect` in sys.modules is a stand-in module that imports the
    real one on its first attribute read; right after, the stand-in leaves sys.modules (every later `import
    inspect` gets the real module) and stays only as dataclasses' own global, which forwards to the real
    module when used. Where inspect (or dataclasses) is already imported, this is a plain import."""
    if "dataclasses" in sys.modules or "inspect" in sys.modules:
        import dataclasses

        return dataclasses
    import types

    stand_in = types.ModuleType("inspect", "imports the real inspect module on first use")

    def real(name: str) -> Any:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
        import importlib

        module = importlib.import_module("inspect")
        stand_in.__dict__.update(module.__dict__)  # later reads find the attributes without this function
        return getattr(module, name)

    stand_in.__getattr__ = real  # type: ignore[method-assign]  # PEP 562: only for names not in __dict__
    sys.modules["inspect"] = stand_in
    try:
        import dataclasses
    finally:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
    return dataclasses


dataclasses = _import_dataclasses()
MISSING = dataclasses.MISSING
FrozenInstanceError = dataclasses.FrozenInstanceError

T = TypeVar("T", bound=type)
HOT = 64  # instances of one class before its __init__ is compiled


def record(cls: T | None = None, /, *, slots: bool = False) -> Any:
    """Decorator: a frozen dataclass without generated code."""

    def wrap(c: T) -> T:
        _add_fields(c)
        return _build(_slotted(c) if slots else c)

    return wrap if cls is None else wrap(cls)


def _add_fields(cls: Any) -> None:
    """What `dataclass(init=False, repr=False, eq=False)` leaves on a class, without its per-class work
    (string annotations checked against typing by regular expression, a signature for the docstring, abc
    updates):
    the fields, base classes' first, in order, as dataclasses.Field objects, so dataclasses.fields, replace,
    asdict and is_dataclass work. Class variables (ClassVar) are not fields; nothing here uses InitVar or
    KW_ONLY (they raise)."""
    found: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        found.update(getattr(base, _FIELDS, {}))
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        text = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
        if text.startswith(("ClassVar", "typing.ClassVar")) or kind is ClassVar:
            continue
        if text.startswith(("InitVar", "KW_ONLY", "dataclasses.")):
            raise TypeError(f"@record {cls.__qualname__}.{name}: InitVar and KW_ONLY are not supported")
        default = cls.__dict__.get(name, MISSING)
        f = default if isinstance(default, dataclasses.Field) else dataclasses.field(default=default)
        f.name, f.type, f._field_type = name, kind, _FIELD  # type: ignore[attr-defined]
        if isinstance(default, dataclasses.Field):
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        found[name] = f
    setattr(cls, _FIELDS, found)
    cls.__dataclass_params__ = _PARAMS
    cls.__match_args__ = tuple(found)


@dataclasses.dataclass(init=False, repr=False, eq=False)
class _Template:
    """A class processed by dataclasses once: its parameters (init, repr, eq off; not frozen) are every
    record's, as `dataclass(init=False, repr=False, eq=False)` would set them."""


_FIELDS = "__dataclass_fields__"
_FIELD = dataclasses._FIELD  # type: ignore[attr-defined]  # the marker dataclasses.fields() selects by
_PARAMS = _Template.__dataclass_params__  # type: ignore[attr-defined]


def _slotted(cls: Any) -> Any:
    """The class again with `__slots__` (what `dataclass(slots=True)` does), plus one slot where the record
    keeps its hash once computed: a record is a cache key (weights per model and quantization), and hashing a
    model's ~60 fields on every lookup cost more than the lookup saved."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    inherited = {n for b in cls.__mro__[1:-1] for n in _slots_of(b)}
    body = dict(cls.__dict__)
    body["__slots__"] = tuple(n for n in (*names, _HASH) if n not in inherited)
    for n in (*names, "__dict__", "__weakref__"):
        body.pop(n, None)
    new = type(cls)(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    return new


def _slots_of(cls: type) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


_HASH = "_record_hash"


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

    shared_init = __init__
    built = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # type: ignore[no-redef]
        nonlocal built
        built += 1
        if built == HOT and cls.__dict__.get("__init__") is __init__:
            cls.__init__ = _compiled_init(cls, spec, shared_init, post_init)
        shared_init(self, *args, **kwargs)

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

    def __hash_kept__(self: Any) -> int:  # slotted: computed once (the fields never change)
        try:
            return self._record_hash  # type: ignore[no-any-return]
        except AttributeError:
            h = hash(hash_key(self))
            set_(self, _HASH, h)
            return h

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
    if _HASH in {n for b in cls.__mro__ for n in _slots_of(b)}:
        methods["__hash__"] = __hash_kept__
    for name, fn in methods.items():
        if name in ("__repr__", "__eq__", "__hash__") and name in cls.__dict__:
            continue  # the class defines its own
        fn.__qualname__ = f"{label}.{name}"
        setattr(cls, name, fn)
    return cls


def _compiled_init(cls: Any, spec: tuple[tuple[str, Any, Any], ...], shared: Callable[..., None],
                   post_init: Callable[[Any], None] | None) -> Callable[..., None]:
    """`__init__` as source, one assignment per field; for a record without slots (its fields in its
    `__dict__`, no slot of a base class among them), one update of its `__dict__` with all the fields: what
    the assignments would leave there, without a call of object.__setattr__ per field (~half the time of a
    30-field record: the every-card plan's card rows). A call it does not take as it is (a missing argument,
    an unknown keyword, too many positionals) goes to the shared `__init__`, which raises the usual
    TypeError."""
    ns: dict[str, Any] = {"_cf_set": object.__setattr__, "_cf_missing": _Missing, "_cf_shared": shared,
                          "_cf_post": post_init}
    whole = not any(_slots_of(b) for b in cls.__mro__)
    params, required, body = [], [], []
    for i, (name, default, factory) in enumerate(spec):
        if default is MISSING and factory is None:
            params.append(f"{name}=_cf_missing")
            required.append(name)
        elif factory is not None:
            ns[f"_cf_factory{i}"] = factory
            params.append(f"{name}=_cf_missing")
            body.append(f"    if {name} is _cf_missing: {name} = _cf_factory{i}()")
        else:
            ns[f"_cf_default{i}"] = default
            params.append(f"{name}=_cf_default{i}")
        if not whole:
            body.append(f"    _cf_set(self, {name!r}, {name})")
    if whole and spec:
        body.append(f"    self.__dict__.update({{{', '.join(f'{n!r}: {n}' for n, _, _ in spec)}}})")
    names = ", ".join(n for n, _, _ in spec)
    given = ", ".join(f"{n}={n}" for n, _, _ in spec)
    slow = " or ".join(["_cf_kwargs", *(f"{n} is _cf_missing" for n in required)])
    src = (f"def __init__(self, {', '.join(params)}, *_cf_args, **_cf_kwargs):\n"
           f"    if _cf_args:\n"  # every field given by position, and more
           f"        return _cf_shared(self, {names}, *_cf_args, **_cf_kwargs)\n"
           f"    if {slow}:\n"
           f"        return _cf_shared(self, **{{k: v for k, v in dict({given}).items() "
           f"if v is not _cf_missing}}, **_cf_kwargs)\n"
           + "\n".join(body) + "\n"
           + ("    _cf_post(self)\n" if post_init is not None else ""))
    exec(compile(src, f"<record {cls.__qualname__}>", "exec"), ns)  # source built above from field names only
    fn = ns["__init__"]
    fn.__qualname__ = f"{cls.__qualname__}.__init__"
    return fn  # type: ignore[no-any-return]


class _Missing:
    """Marks an argument the caller did not give (a field may default to None)."""


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of `names` as a tuple (operator.attrgetter, in C)."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()
