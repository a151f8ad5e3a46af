"""Engine releases as data (data/releases.toml): which features a runtime's release has, read by one
`profile_at(profile, release)`. `--runtime NAME@RELEASE` names one (`runtime_named`); a validation record is
timed at the release its source states, or, where it states none, at the release current at its date."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from typing import Any

from ..errors import CatalogError, InputError
from .loader import builtin, builtin_path
from .records import record
from .schema import check_keys, keys_of

# catalog/runtimes.py imports this module (a runtime named with '@'), so profiles are typed Any here
RuntimeProfile = Any

# Patterns are kept as text and compiled on first use, by the re module's own cache (`re.match(_SEMVER,
# text)`): `cardfit plan` without "@RELEASE" reads none of them, and compiling them all at import was ~2 % of
# its instructions (valgrind --tool=callgrind).
# one parser for every way a release is written: "0.10.1.1", "v0.7.3", "~0.6.4 (rocm/vllm ...)",
# "1.0.0rc3", "1.2.0rc6.post3", "NIM 1.8.0 (TensorRT-LLM ...)", "b3622", "build: 93bc3839 (3622)"
_NIM = r"(?i)^\s*NIM\s+v?(\d+)\.(\d+)(?:\.(\d+))?"
# a fourth number and a `.postN` suffix (SGLang's 0.4.4.post1, vLLM's 0.10.1.1) order after the release they
# follow: (0, 4, 4, 1) > (0, 4, 4)
_SEMVER = r"^\s*~?v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(?:post)?(\d+))?"
_BUILD = r"^\s*b(\d{3,5})\b|(?:^|[\s(b])(\d{3,5})(?:\)|\s|$)"
# "vllm@2024-08": the release current at that date (words may follow: _SWITCHES)
_DATE = r"^(\d{4}-\d{2}(?:-\d{2})?)(?:$|\s)"


@record(slots=True)
class Feature:
    id: str
    what: str
    source: str
    from_: str = ""  # the first release that has it ("from" in the file)
    from_nim: str = ""  # the first NVIDIA NIM release that has it (TensorRT-LLM's NIM line)
    date: str = ""  # "YYYY-MM[-DD]": the first release's date, for records that state no release
    when: str = ""  # its `without` / `reads` apply only while this other feature is on
    without: tuple[tuple[str, Any], ...] = ()
    # field -> ((stack or "*", constant), ...)
    reads: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


@record(slots=True)
class Release:
    """A runtime at one release: its name as given ("" = the current release), the parsed number, the line
    it belongs to ("" or "nim"), whether it was stated, and the features it has."""

    runtime: str
    name: str
    number: tuple[int, ...] = ()
    line: str = ""
    features: frozenset[str] = frozenset()  # the features of the runtime's table it has
    lacks: frozenset[str] = frozenset()  # the features of the runtime's table it does not have
    stated: bool = True  # False: a record's source named none (its date chose it), or the current one

    def has(self, feature: str) -> bool:
        """Whether the release has a feature; one its runtime's table does not list it always has."""
        return feature not in self.lacks

    @property
    def label(self) -> str:
        return f"{self.runtime}@{self.name}" if self.name else self.runtime


@record(slots=True)
class RuntimeReleases:
    id: str
    current: str
    source: str
    features: tuple[Feature, ...]


_KEYS = {"id", "current", "source", "feature"}
_FEATURE_KEYS = keys_of(Feature) - {"from_"} | {"from"}


def _feature(row: dict[str, Any], runtime: str) -> Feature:
    path = builtin_path("releases.toml")
    check_keys(row, _FEATURE_KEYS, table=f"release feature of '{runtime}'", path=path)
    reads = []
    for field, how in (row.get("reads") or {}).items():
        by_stack = how if isinstance(how, dict) else {"*": how}
        reads.append((field, tuple(sorted((str(k), str(v)) for k, v in by_stack.items()))))
    return Feature(id=row["id"], what=row["what"], source=row["source"], from_=str(row.get("from", "")),
                   from_nim=str(row.get("from_nim", "")), date=str(row.get("date", "")),
                   when=str(row.get("when", "")),
                   without=tuple(sorted((k, _frozen(v)) for k, v in (row.get("without") or {}).items())),
                   reads=tuple(reads))


def _frozen(value: Any) -> Any:
    """A `without` value as a profile holds it: TOML's lists as tuples (context_tiers = [] -> ())."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


@cache
def release_table() -> dict[str, RuntimeReleases]:
    path = builtin_path("releases.toml")
    out = {}
    for row in builtin("releases.toml")["runtime"]:
        check_keys(row, _KEYS, table="releases runtime", path=path)
        feats = tuple(_feature(f, row["id"]) for f in row.get("feature", ()))
        out[row["id"]] = RuntimeReleases(row["id"], str(row.get("current", "")), row["source"], feats)
    return out


def parse_release(runtime: str, text: str) -> tuple[tuple[int, ...], str] | None:
    """(number, line) of a release as written ("0.10.1.1" -> ((0, 10, 1, 1), ""), "0.4.4.post1" ->
    ((0, 4, 4, 1), ""), "NIM 1.8.0" -> ((1, 8, 0),
    "nim"), "b3622" -> ((3622,), "")); None when the text names no release number."""
    text = str(text or "")
    # build numbers (b3622) are llama.cpp's; Ollama's releases are semantic versions (0.3.3)
    if runtime == "llama.cpp" and (m := re.search(_BUILD, text)) and not re.match(_SEMVER, text):
        return (int(m[1] or m[2]),), ""
    if m := re.match(_NIM, text):
        return tuple(int(x) for x in m.groups() if x is not None), "nim"
    if m := re.match(_SEMVER, text):
        return tuple(int(x) for x in m.groups() if x is not None), ""
    return None


def _before(number: tuple[int, ...], first: str, runtime: str) -> bool:
    parsed = parse_release(runtime, first)
    return parsed is not None and number < parsed[0]


def _has(f: Feature, number: tuple[int, ...] | None, line: str, date: str, runtime: str) -> bool:
    if number is None:  # not stated: the release of the record's date (none: the current one)
        return not (date and f.date and date[:len(f.date)] < f.date)
    first = f.from_nim if line == "nim" else f.from_
    if not first:  # a feature with no release number of this line: the line has always had it
        return True
    return not _before(number, first, runtime)


# Words a stated release may carry beside its number, naming the engine a source ran where the release's
# default differs: vLLM's engine (VLLM_USE_V1: "0.8.2 (V0 engine)") and --async-scheduling, TensorRT-LLM's
# backend ("0.17 (pytorch backend)": the PyTorch backend was opt-in before 1.0; "tensorrt": an engine built
# by trtllm-build). Each: (pattern, features it turns on, features it turns off).
_SWITCHES: dict[str, tuple[tuple[str, frozenset[str], frozenset[str]], ...]] = {
    "vllm": ((r"\bV1\b", frozenset({"v1_engine"}), frozenset()),
             (r"\bV0\b", frozenset(), frozenset({"v1_engine", "async_scheduling"})),
             (r"(?i)\basync[-_ ]scheduling\b", frozenset({"async_scheduling"}), frozenset())),
    "trtllm": ((r"(?i)\bpytorch\b", frozenset({"pytorch_backend", "overlap_executor"}),
                frozenset()),
               (r"(?i)\btensorrt\b(?!-llm)", frozenset(),
                frozenset({"pytorch_backend", "overlap_executor"}))),
}


def release(runtime: str, stated: str | None = None, date: str | None = None) -> Release:
    """The release a runtime runs at: `stated` as a source or a user writes it ("0.10.1.1", "NIM 1.8.0",
    "b3622", "0.8.2 (V0 engine)", "0.17 (pytorch backend)", or a date "2024-08": the release current then);
    not stated, the release current at `date` ("YYYY-MM[-DD]"); neither, the current release. Raises
    InputError for a stated release that names no number."""
    table = release_table().get(runtime)
    stated = str(stated or "").strip()
    if m := re.match(_DATE, stated):  # a date, perhaps with switches after it
        rel = _switched(release(runtime, None, m[1]), stated[m.end(1):], table)
        return replace(rel, name=stated, stated=True)
    parsed = parse_release(runtime, stated) if stated else None
    if stated and parsed is None:
        raise InputError(f"'{stated}' is not a {runtime} release: write it as the engine numbers it "
                         f"(e.g. {_example(runtime)})", field="runtime")
    if table is None:
        return Release(runtime, stated, parsed[0] if parsed else (), stated=bool(stated))
    number, line = parsed if parsed else (None, "")
    probe = number
    if probe is None and not date and table.current:
        # neither stated nor dated: the current release, by its own number (a feature the table lists ahead
        # of it, as a vLLM or SGLang feature of a release after `current`, is one it does not have yet)
        current = parse_release(runtime, table.current)
        probe, line = current if current is not None else (None, line)
    feats = frozenset(f.id for f in table.features if _has(f, probe, line, str(date or ""), runtime))
    rel = Release(runtime, stated, number or (), line, feats, frozenset(f.id for f in table.features) - feats,
                  bool(stated))
    return _switched(rel, stated, table)


def _switched(rel: Release, text: str, table: RuntimeReleases | None) -> Release:
    """The release with the features the words of `text` turn on or off (_SWITCHES)."""
    feats = set(rel.features)
    for pattern, on, off in _SWITCHES.get(rel.runtime, ()):
        if re.search(pattern, text):
            feats = (feats | on) - off
    known = frozenset(f.id for f in table.features) if table is not None else frozenset()
    return replace(rel, features=frozenset(feats), lacks=known - feats)


def _example(runtime: str) -> str:
    return {"llama.cpp": "llama.cpp@b3622", "trtllm": "trtllm@1.0.0 or trtllm@NIM 1.8.0"}.get(
        runtime, f"{runtime}@0.10.1")


def question_runtime(runtime: str, stated: str | None, date: str | None) -> str:
    """The --runtime a user would pass for the engine a source states: "vllm@0.10.1.1" for a release it
    names, "vllm@2024-08-15" for one it does not (the release current at its date; the words of _SWITCHES
    kept), else the bare name (a runtime cardfit knows no releases of)."""
    table = release_table().get(runtime)
    stated = str(stated or "").strip()
    if table is None:
        return runtime
    switched = any(re.search(p, stated) for p, _, _ in _SWITCHES.get(runtime, ()))
    if stated and _numbered(table) and parse_release(runtime, stated) is not None:
        # the release and the engine words (_SWITCHES) a user passes; what else a source writes beside the
        # number (a container image: "1.2.0rc6 (nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6)") is not
        # part of the question
        def kept(m: re.Match[str]) -> str:
            return m[0] if any(re.search(p, m[0]) for p, _, _ in _SWITCHES.get(runtime, ())) else ""

        short = " ".join(re.sub(r"\([^()]*\)", kept, stated).split())
        # a build numbered only in its parentheses ("93bc3839 (3622)") keeps them
        return f"{runtime}@" + (short if parse_release(runtime, short) is not None else stated)
    if date and re.match(_DATE, str(date)) and table.features:
        return f"{runtime}@{date}" + (f" ({stated})" if switched else "")
    if switched and table.current:  # the current release, run with the engine the words name
        return f"{runtime}@{table.current} ({stated})"
    return runtime


def current_release(runtime: str) -> str:
    table = release_table().get(runtime)
    return table.current if table is not None else ""


def release_name(rt: RuntimeProfile) -> str | None:
    """The release a profile is at, as output names it: the one asked for ("0.6.3", "2024-08"), else the
    current one of data/releases.toml; None for a runtime cardfit knows no releases of."""
    if rt.release is not None and rt.release.name:
        return str(rt.release.name)
    return current_release(rt.id) or None


def container_image(rt: RuntimeProfile) -> str:
    """The container image a launch bundle runs (data/runtimes.toml `image`; "": none), its `{release}` the
    release the profile models: the one asked for where it is a release number ("vllm@0.10.1.1" ->
    vllm/vllm-openai:v0.10.1.1), else the current one of data/releases.toml. One owner of "current": the
    image starts the engine release whose timing cardfit printed."""
    if "{release}" not in rt.image:
        return rt.image
    version = current_release(rt.id)
    name = rt.release.name if rt.release is not None else ""
    if name and not re.match(_DATE, name) and not rt.release.line and re.match(_SEMVER, name):
        version = name.split()[0].lstrip("~v")
    return rt.image.replace("{release}", version)


def profile_at(rt: RuntimeProfile, rel: Release) -> RuntimeProfile:
    """The runtime profile at a release: every feature the release lacks sets its `without` fields and
    reads its `reads` constants (Release and `reads` travel with the profile: core/constants.py fitted)."""
    table = release_table().get(rt.id)
    fields: dict[str, Any] = {}
    reads: dict[str, tuple[tuple[str, str], ...]] = {}
    # the features the release lacks, newest first: where two set one field, the oldest (the state before
    # it) is applied last and holds (Ollama's default context: 2,048 before 0.6.7, not 4,096 before 0.15.5)
    lacked = [f for f in (table.features if table is not None else ())
              if not (rel.has(f.id) or (f.when and not rel.has(f.when)))]
    for f in sorted(lacked, key=lambda f: f.date or "", reverse=True):
        fields.update(dict(f.without))
        reads.update(dict(f.reads))
    for field, by_stack in reads.items():  # a constant read in place of the field: its stored value too
        anywhere = dict(by_stack).get("*")
        if anywhere:
            fields[field] = getattr(rt, anywhere)
    pinned = frozenset(k for f in (table.features if table else ()) if not rel.has(f.id)
                       and not (f.when and not rel.has(f.when)) for k, _ in f.without)
    return replace(rt, **fields, release=rel, reads=tuple(sorted(reads.items())), pinned=pinned)


def drafting(rt: RuntimeProfile, overlapped: bool = False) -> RuntimeProfile:
    """The profile of a runtime that drafts (--speculative): the sequences it schedules by default become its
    `speculative_max_num_seqs` (a user's --max-num-seqs still wins: it is only the default), and the release
    features of `speculative_lacks` are off whatever its release (SGLang: every release from 0.4 to 0.5.10
    sets max_running_requests = 48 when not given and disable_overlap_schedule = True for EAGLE, EAGLE3,
    NEXTN (MTP), STANDALONE and NGRAM: python/sglang/srt/server_args.py; data/runtimes.toml), so their
    `without` fields and `reads` constants apply as for a release before them. `overlapped`: the drafter runs
    on the release's overlapped speculative path (SGLang's spec v2 from 0.5.11: data/releases.toml
    spec_overlap, services/speculative.py overlapped), which keeps those features. The one owner: plan, speed,
    deploy and validation build their context through services/plan.py build_context, which calls it."""
    if not (rt.speculative_max_num_seqs or rt.speculative_lacks):
        return rt
    table = release_table().get(rt.id)
    known = frozenset(f.id for f in table.features) if table is not None else frozenset()
    if not frozenset(rt.speculative_lacks) <= known:
        raise CatalogError(f"runtimes.toml: {rt.id} speculative_lacks names "
                           f"{', '.join(sorted(set(rt.speculative_lacks) - known))}, not a feature of its "
                           "releases",
                           path=builtin_path("releases.toml"))
    out = without_features(rt, frozenset(() if overlapped else rt.speculative_lacks))
    if rt.speculative_max_num_seqs:
        out = replace(out, max_num_seqs=rt.speculative_max_num_seqs, max_num_seqs_big_card=0,
                      max_num_seqs_other=0)
    return out


def without_features(rt: RuntimeProfile, off: frozenset[str]) -> RuntimeProfile:
    """The profile at its release (the current one where it names none) with the features `off` turned off
    whatever the release: their `without` fields and `reads` constants apply as for a release before them
    (a drafting SGLang's scheduler: drafting; a vLLM worker whose KV connector keeps the KV cache from being
    sized from measured memory: runtimes/vllm_like.py serving)."""
    if rt.release is None:
        rt = at_release(rt, "")
    table = release_table().get(rt.id)
    known = frozenset(f.id for f in table.features) if table is not None else frozenset()
    rel = rt.release
    return profile_at(rt, replace(rel, features=rel.features - off, lacks=rel.lacks | (off & known)))


def runtime_named(text: str, find: Any) -> RuntimeProfile | None:
    """The runtime a user names, at the release after '@' ("vllm@0.10.1"); `find` looks the name up (a
    Registry's find). None when the name is unknown; InputError for a release that cannot be read or a
    runtime whose releases cardfit does not know."""
    name, at, rel = str(text).partition("@")
    rt = find(name.strip())
    if rt is None or not at:
        return rt if rt is None else at_release(rt, "")
    rel = rel.strip()
    if not rel:
        raise InputError(f"'{text}': name a release after '@' (e.g. {_example(rt.id)}), or drop the '@'",
                         field="runtime")
    table = release_table().get(rt.id)
    if table is None or not (_numbered(table) or (re.match(_DATE, rel) and table.features)):
        known = ", ".join(sorted(k for k, v in release_table().items() if _numbered(v)))
        raise InputError(f"cardfit knows no releases of {rt.name}: drop '@{rel}' (releases are known for "
                         f"{known})", field="runtime")
    return at_release(rt, rel)


def _numbered(table: RuntimeReleases) -> bool:
    """Whether a runtime's releases can be named by number: it has a current release, or its features name
    the release they came in (Ollama: current left empty, data/releases.toml)."""
    return bool(table.current or any(f.from_ for f in table.features))


def at_release(rt: RuntimeProfile, stated: str, date: str | None = None) -> RuntimeProfile:
    """`profile_at` for a release as written (release(); "" and no date: the current one)."""
    if rt.release is not None:
        return rt
    return _at(rt, stated, date or "")


@cache
def _at(rt: RuntimeProfile, stated: str, date: str) -> RuntimeProfile:
    return profile_at(rt, release(rt.id, stated, date))


def check_table(runtime_ids: set[str], fields: set[str]) -> None:
    """Every runtime the table names is in runtimes.toml (`runtime_ids`), every feature's `without` field is
    a profile field (`fields`: catalog/runtimes.py KEYS) and every constant it reads is one
    (tests/test_releases.py)."""
    path = builtin_path("releases.toml")
    for rid, rr in release_table().items():
        if rid not in runtime_ids:
            raise CatalogError(f"releases.toml: runtime '{rid}' is not in runtimes.toml", path=path)
        for f in rr.features:
            for field in [k for k, _ in f.without] + [k for k, _ in f.reads] + \
                         [c for _, by in f.reads for _, c in by]:
                if field not in fields:
                    raise CatalogError(f"releases.toml: {rid} feature '{f.id}' names '{field}', not a "
                                       "runtime profile field", path=path)
