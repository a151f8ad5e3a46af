"""The command table: every question cardfit answers, in one place. The CLI (`cardfit NAME`), the web API
(POST /api/NAME) and the Python API (`cardfit.NAME(...)`) are all built from these rows.

A command is one service module (cardfit/services/NAME.py: an input class described with `opt`, and a run
function from that input to a frozen result with `to_json()`) and one row here; a text renderer in
cardfit/cli/ (a function decorated with `@command("NAME")` that also carries the help text) is optional.
Modules are named as strings and imported only when their command runs, so importing this table costs
nothing."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from math import isfinite
from typing import Any

from ..catalog.records import HOT, record


@record
class Command:
    name: str  # `cardfit NAME`; the Python function is NAME with dashes as underscores
    # module holding the input class and the run function: in cardfit.services, or a dotted path from the
    # package root ("validation.validate": validation calls the services, never the other way)
    service: str
    input: str  # the input class: each option described once
    run: str  # the function: input → result
    render: str  # module in cardfit.cli whose `@command(NAME)` function prints the result as text; "" for
    # none: `cardfit NAME` prints the result's keys as indented lines (cli/commands.py plain_render)
    summary: str  # one line: the web endpoint's summary, the Python function's docstring (and the CLI help
    # of a command without a renderer)
    web: bool = True  # also POST /api/NAME
    argument: str | None = "model"  # the positional argument of the Python function (and of the CLI)

    @property
    def function(self) -> str:
        return self.name.replace("-", "_")

    @property
    def path(self) -> str:
        return f"/api/{self.name}"

    def _module(self) -> Any:
        if "." in self.service:
            return import_module(f"{__package__.rpartition('.')[0]}.{self.service}")
        return import_module(f"{__package__}.{self.service}")

    def input_type(self) -> type:
        return getattr(self._module(), self.input)  # type: ignore[no-any-return]

    def execute(self, inp: Any) -> Any:
        """The result for a validated input."""
        return getattr(self._module(), self.run)(inp)

    def call(self, values: dict[str, Any]) -> Any:
        """Validate raw values (one InputError line for the first problem) and run."""
        from .inputs import parse

        return self.execute(parse(self.input_type(), values))


class Result:
    """Base of a command's frozen result: `to_json()` is its fields in order, as plain data (nested results
    and tuples of them become dicts and lists; a dict's values are converted the same way) — the keys of
    `--json`, the web API and the Python API. A field named in the class's `omit_none` is left out while it is
    None; one named in `flatten` (a Result or None) puts its own keys in its place, none while it is None
    (a group of keys that is there or not as a whole)."""

    omit_none: tuple[str, ...] = ()
    flatten: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        cls = type(self)
        convert = _CONVERTERS.get(cls)
        if convert is None:
            uses = _USES[cls] = _USES.get(cls, 0) + 1
            if uses < HOT:  # a class converted a few times (a one-shot --json answer): no source compiled
                return _fields_json(self, cls)
            convert = _converter(cls)
        return convert(self)

    def json_text(self) -> str:
        """`json.dumps(self.to_json(), ensure_ascii=False, allow_nan=False, separators=(",", ":"))` (what
        the web API answers), written from the fields without the plain data in between (_writer: compiled
        on first use, as only the web server asks it); a class with its own to_json goes through it."""
        cls = type(self)
        write = _WRITERS.get(cls)
        if write is None:
            if cls.to_json is not Result.to_json:
                return _dumps(self.to_json())
            write = _writer(cls)
        return write(self)


@record
class ModelBasics(Result):
    """What names and sizes a model: the first keys of a catalog row (services/catalogs.py ModelRow) and of
    the plan's model (services/plan.py ModelView); here, beside Result, so that a plan does not import the
    catalog listings' module."""

    id: str
    name: str
    hf: str | None
    params: float
    active_params: float
    layers: int
    attention: str


_NAMES: dict[type, tuple[str, ...]] = {}
# Conversions of one result class before its to_json is compiled (_converter): as records compile their
# __init__ (catalog/records.py HOT), compiling costs ~0.1-0.4 ms a class (a `--json` plan compiled 13, ~2 ms
# of its ~55), which a class converted a few times never earns back; the web page's every-card plan converts
# ~120 cards an answer and gets the compiled one.
_USES: dict[type, int] = {}


def _names(cls: type) -> tuple[str, ...]:
    """A result class's field names, in order (found once per class)."""
    from dataclasses import fields

    _NAMES[cls] = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    return _NAMES[cls]


_SCALARS = frozenset({str, int, float, bool, type(None)})  # returned as they are, found by their exact type
_CONVERTERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _converter(cls: type) -> Callable[[Any], dict[str, Any]]:
    """`Result.to_json` for one class, as source with one line per field, made once per class (as records
    compile their `__init__`: catalog/records.py): the page's every-card plan turns ~120 cards of ~30 fields
    each into plain data per answer, and a loop reading each field by name took twice as long. A field is
    kept as it is where its exact type is a scalar, else made plain (_plain); one in `omit_none` is left out
    while it is None; one in `flatten` puts its own keys in its place (none while it is None)."""
    skip, inline = getattr(cls, "omit_none", ()), getattr(cls, "flatten", ())
    body = ["def to_json(self):", "    out = {}"]
    for n in _NAMES.get(cls) or _names(cls):  # field names: identifiers (dataclasses.fields)
        body.append(f"    v = self.{n}")
        if n in inline:
            body.append("    if v is not None: out.update(v.to_json())")
        elif n in skip:
            body.append(f"    if v is not None: out[{n!r}] = v if type(v) in _S else _plain(v)")
        else:
            body.append(f"    out[{n!r}] = v if type(v) in _S else _plain(v)")
    body.append("    return out")
    ns: dict[str, Any] = {"_S": _SCALARS, "_plain": _plain}
    exec(compile("\n".join(body) + "\n", f"<to_json {cls.__qualname__}>", "exec"), ns)  # field names only
    _CONVERTERS[cls] = ns["to_json"]
    return _CONVERTERS[cls]  # type: ignore[no-any-return]


def _fields_json(result: Any, cls: type) -> dict[str, Any]:
    """What the compiled to_json of `cls` returns (_converter), reading the fields in a loop."""
    skip, inline = getattr(cls, "omit_none", ()), getattr(cls, "flatten", ())
    out: dict[str, Any] = {}
    for n in _NAMES.get(cls) or _names(cls):
        v = getattr(result, n)
        if n in inline:
            if v is not None:
                out.update(v.to_json())
        elif n in skip:
            if v is not None:
                out[n] = v if type(v) in _SCALARS else _plain(v)
        else:
            out[n] = v if type(v) in _SCALARS else _plain(v)
    return out


def _plain(value: Any) -> Any:
    if type(value) in _SCALARS or isinstance(value, str | int | float):  # (subclasses: enums)
        return value
    if isinstance(value, Result):
        return value.to_json()
    if isinstance(value, tuple | list):  # (a scalar item as it is, without a call: _plain's first test)
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def to_json(result: Any) -> Any:
    """The plain-data view of a result: what `--json`, the web API and the Python API return."""
    return result.to_json() if hasattr(result, "to_json") else result


# ---- the web API's JSON text ----------------------------------------------------------------------------
# What json.dumps(to_json(result), ensure_ascii=False, allow_nan=False, separators=(",", ":")) writes, written
# from a result's fields: the page's every-card plan is ~120 cards of ~30 fields, and building the plain data
# only for the encoder to walk it again cost as much as writing the text. Each value is written as the
# encoder writes it (CPython Modules/_json.c encoder_listencode_obj: None, True, False, then str (a subclass
# too: an enum's value), int and float by their types' repr, a non-finite float refused, lists and tuples,
# dicts); a value of any other kind is made plain (_plain) and written by the encoder itself.

def _dumps(data: Any) -> str:
    import json

    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _float(v: float) -> str:
    """A float as the encoder writes it (its repr; a non-finite one refused with the encoder's ValueError),
    the text of a non-zero one kept by value (_FLOATS): a float's repr is a shortest round-trip decimal
    conversion (~2,500 instructions on CPython 3.11), and the page's figures recur (each card's price, its
    decode rounded to 0.1 tokens/s). Zeros are not kept (0.0 and -0.0 are one key)."""
    if not isfinite(v):
        return _dumps(v)
    text = _FLOAT_REPR(v)
    if v:
        if len(_FLOATS) >= FLOATS_KEPT:
            _FLOATS.clear()  # one atomic step (the app's worker threads share it and take no lock)
        _FLOATS[v] = text
    return text


FLOATS_KEPT = 8192  # texts of floats kept (~100 bytes each)
_FLOATS: dict[float, str] = {}


def _str(v: str) -> str:
    """A string as the encoder writes it, the text of a short one kept by value (_STRINGS): the every-card
    plan writes each card's name and the few launch lines many times an answer."""
    text = _string(v)
    if len(v) <= STRING_KEPT_CHARS:
        if len(_STRINGS) >= STRINGS_KEPT:
            _STRINGS.clear()  # one atomic step, as _FLOATS
        _STRINGS[v] = text
    return text


STRINGS_KEPT, STRING_KEPT_CHARS = 4096, 256  # at most ~4 MB
_STRINGS: dict[str, str] = {}


def _other(v: Any) -> str:
    """A value _VALUE has no writer for by its exact type; a subclass of str, int or float (an enum) is
    written as the encoder writes its base type's value, and its writer is kept under its type."""
    cls = type(v)
    if isinstance(v, str):
        write = _VALUE[cls] = _string
    elif isinstance(v, int):  # (bool is exact: _VALUE)
        write = _VALUE[cls] = int.__repr__
    elif isinstance(v, float):
        write = _VALUE[cls] = _float
    elif isinstance(v, Result):
        return v.json_text()
    else:
        return _dumps(_plain(v))
    return write(v)


def _list(v: list[Any] | tuple[Any, ...]) -> str:
    """A list or tuple as the encoder writes it: each item by its type, as _items writes a field. Most lists
    of an answer are a figure's likely range, [low, high] floats (each card's decode, each priced card's
    cost), written without a loop; the others by a loop, not a list comprehension (a function of its own,
    made and called at each list on CPython 3.11)."""
    kept = _FLOATS.get
    if len(v) == 2 and type(x := v[0]) is float and type(y := v[1]) is float:
        return "[" + (kept(x) or _float(x)) + "," + (kept(y) or _float(y)) + "]"
    get = _VALUE.get
    out: list[str] = []
    add = out.append
    for x in v:
        add((kept(x) or _float(x)) if type(x) is float else get(type(x), _other)(x))
    return "[" + ",".join(out) + "]"


def _string(v: str) -> str:
    """The encoder's own string writer (json.encoder.encode_basestring, in C: ensure_ascii=False), which
    replaces this function once a writer is made (_writer): the json module is imported then, not with
    the command table."""
    from json.encoder import encode_basestring

    return encode_basestring(v)  # type: ignore[no-any-return]


_FLOAT_REPR = float.__repr__
# a writer by exact type; a result class with a compiled writer is added when it is made
_VALUE: dict[type, Callable[[Any], str]] = {
    str: _string, int: int.__repr__, float: _float, type(None): lambda v: "null",
    bool: lambda v: "true" if v else "false", list: _list, tuple: _list}
_WRITERS: dict[type, Callable[[Any], str]] = {}
_ITEMS: dict[type, Callable[[Any, list[str]], None]] = {}


def _items(cls: type) -> Callable[[Any, list[str]], None]:
    """The compiled writer of a result class's `"key":value` items (_writer), in the order of to_json,
    `omit_none` and `flatten` as there: each run of other fields one %-template of their keys, each value
    written by its type (None, str, int, a finite float inline; any other through _VALUE)."""
    global _string
    found = _ITEMS.get(cls)
    if found is not None:
        return found
    # (a copy of the items: another worker thread may register a type in _VALUE meanwhile)
    if _VALUE[str] is _string:
        from json.encoder import encode_basestring

        _VALUE.update({k: encode_basestring for k, w in list(_VALUE.items()) if w is _string})
        _string = encode_basestring
    skip, inline = getattr(cls, "omit_none", ()), getattr(cls, "flatten", ())
    body = ["def items(self, out):", "    a = out.append"]
    run: list[str] = []

    def value(n: str) -> str:  # field names are identifiers (dataclasses.fields)
        return (f"('null' if (v := self.{n}) is None else (_ks(v) or _str(v)) if (t := type(v)) is str"
                " else _i(v) if t is int else (_kf(v) or _f(v)) if t is float else _g(t, _o)(v))")

    def flush() -> None:
        if run:
            template = ",".join(_string(n).replace("%", "%%") + ":%s" for n in run)
            body.append(f"    a({template!r} % ({', '.join(value(n) for n in run)},))")
            run.clear()

    for n in _NAMES.get(cls) or _names(cls):
        if n in inline:
            flush()
            # (a class already written in place here: its items by type, without _inline's checks)
            body.append(f"    if (v := self.{n}) is not None:")
            body.append("        if (w := _W(type(v))) is not None: w(v, out)")
            body.append("        elif not _inline(v, out, _K, _WS): raise _Fallback")
        elif n in skip:
            flush()
            body.append(f"    if self.{n} is not None: a({_string(n) + ':'!r} + {value(n)})")
        else:
            run.append(n)
    flush()
    own = frozenset(n for n in _NAMES[cls] if n not in inline)
    placed: dict[type, Callable[[Any, list[str]], None]] = {}  # the classes _inline wrote in place here
    ns: dict[str, Any] = {"_ks": _STRINGS.get, "_str": _str, "_i": int.__repr__, "_kf": _FLOATS.get,
                          "_f": _float, "_g": _VALUE.get, "_o": _other, "_inline": _inline, "_K": own,
                          "_Fallback": _Fallback, "_W": placed.get, "_WS": placed}
    exec(compile("\n".join(body) + "\n", f"<json_items {cls.__qualname__}>", "exec"), ns)  # field names only
    _ITEMS[cls] = ns["items"]
    return _ITEMS[cls]  # type: ignore[no-any-return]


class _Fallback(Exception):  # noqa: N818  (not an error: a result the compiled writer does not write)
    """A `flatten` field whose keys _inline cannot put in place as to_json does."""


_FLAT: set[tuple[type, frozenset[str]]] = set()  # (a flattened class, its owner's keys): written in place


def _inline(v: Any, out: list[str], keys: frozenset[str],
            placed: dict[type, Callable[[Any, list[str]], None]] | None = None) -> bool:
    """A `flatten` field's keys in its owner's place, after the owner's own `keys`: True where written by
    its class's items, which is where to_json's dict.update adds new keys at the end (a result class with
    the fields' to_json, nothing flattened in it, no key of the owner's); False (nothing written) else.
    `placed`: the owner's classes written in place, each with its items (the owner's writer finds them by
    type the next time: the every-card plan writes a launch line in each card's row)."""
    cls = type(v)
    if (cls, keys) not in _FLAT:
        if not (isinstance(v, Result) and cls.to_json is Result.to_json and not cls.flatten
                and keys.isdisjoint(_NAMES.get(cls) or _names(cls))):
            return False
        _FLAT.add((cls, keys))
    items = _items(cls)
    if placed is not None:
        placed[cls] = items
    items(v, out)
    return True


def _writer(cls: type) -> Callable[[Any], str]:
    """Result.json_text for one class whose to_json is the fields' (_items), made once per class; a class
    with more than one `flatten` field (their keys may meet) is written from its to_json."""
    if len(getattr(cls, "flatten", ())) > 1:
        def whole(self: Any) -> str:
            return _dumps(self.to_json())

        _WRITERS[cls] = _VALUE[cls] = whole
        return whole
    items = _items(cls)

    def write(self: Any) -> str:
        out: list[str] = []
        try:
            items(self, out)
        except _Fallback:
            return _dumps(self.to_json())
        return "{" + ",".join(out) + "}"

    _WRITERS[cls] = _VALUE[cls] = write
    return write


def json_text(value: Any) -> str:
    """The web API's JSON text of a command's result: `json.dumps(to_json(value), ensure_ascii=False,
    allow_nan=False, separators=(",", ":"))` (Result.json_text for a result, or the value's own
    json_text)."""
    own = getattr(value, "json_text", None)
    return own() if own is not None else _dumps(to_json(value))


COMMANDS = (
    Command("plan", "plan", "PlanInput", "plan", "plan_cmd",
            "Memory, fit verdict per card, speed and cost (cardfit plan)"),
    Command("max-context", "reverse", "MaxContextInput", "max_context", "plan_cmd",
            "Longest context that fits (cardfit max-context)"),
    Command("max-sequences", "reverse", "MaxContextInput", "max_sequences", "plan_cmd",
            "The most concurrent sequences at a context (cardfit max-sequences)", web=False),
    Command("largest-model", "reverse", "MaxContextInput", "largest_model", "plan_cmd",
            "The largest catalog models that fit a card (cardfit largest-model)", web=False, argument=None),
    Command("speed", "speed", "SpeedInput", "speed_report", "speed_cmd",
            "Decode speed per concurrency level"),
    Command("deploy", "deploy", "DeployInput", "deploy_report", "deploy_cmd",
            "The cheapest deployment that serves a load within TTFT/TPOT targets, with its command"),
    Command("finetune", "finetune", "FinetuneInput", "finetune_report", "finetune_cmd",
            "Fine-tuning memory and cards"),
    Command("breakeven", "breakeven", "BreakevenInput", "breakeven_report", "cost_cmd",
            "Rent vs API break-even", argument=None),
    Command("stack", "stack", "StackInput", "stack", "stack_cmd",
            "Several models on one machine: placement per card, what to change, one launch bundle",
            argument="file"),
    Command("validate", "validation.validate", "ValidateInput", "validate_report", "validate_cmd",
            "cardfit's predictions against real measurements, error per kind and feature (cardfit validate)",
            web=False, argument="kind"),
)

BY_NAME = {c.name: c for c in COMMANDS}
