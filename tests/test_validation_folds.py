"""`cardfit validate`'s prebuilt folds (data/snapshot/validation_folds.json, validation/calibrate.py
build_folds, written by scripts/build_catalog.py): read only while the digest they hold is that of the data
and the modules the refit ran, each fold what the refit gives, and validate's report the same either way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cardfit.validation import calibrate, validate
from cardfit.validation.calibrate import Refit, prebuilt_folds, stored

PACKAGE = Path(calibrate.__file__).resolve().parents[1]


def test_the_shipped_folds_are_fresh():
    """Rebuild with `python scripts/build_catalog.py` after changing the records, a catalog or the model."""
    assert prebuilt_folds() is not None


# Folds whose records are llama.cpp's only: their refit is a few medians of single-stream figures (cheap)
LLAMACPP_FOLDS = ("github:xiongjiedai", "github.com/ggml-org/llama.cpp/pull/6017", "reddit.sentinel-team.org",
                  "github.com/geerlingguy/ai-benchmarks/issues/48", "tianchengwu.com")


@pytest.mark.parametrize("src", LLAMACPP_FOLDS)
def test_a_prebuilt_fold_is_what_the_refit_gives(src):
    """Every llama.cpp and Ollama constant of the fold, read from the file, is the refit's, value and type:
    a hand edit or a stale generator fails here."""
    fold = prebuilt_folds()[src]  # type: ignore[index]
    refit = Refit(validate.all_records(), leave_out=src)
    have = {**stored(), **fold.changed}
    keys = [k for k in have if k.startswith(("llama.cpp.", "ollama."))]
    assert fold.changed, src  # each of these folds moves a constant
    for k in keys:
        assert have[k] == refit[k] and type(have[k]) is type(refit[k]), k
    assert set(fold.prior) == {f.key for f in calibrate.only_measured_by(validate.all_records(), src)}


@pytest.fixture()
def package_copy(tmp_path, monkeypatch):
    """The package copied, and calibrate reading its files from the copy."""
    root = tmp_path / "cardfit"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(calibrate, "_package", lambda: root)
    assert prebuilt_folds() is not None
    return root


@pytest.mark.parametrize("edit,stale", [
    ("data/validation/speed.toml", True),  # a record
    ("data/runtimes.toml", True),  # a stored constant
    ("data/gpus.toml", True),  # a catalog
    ("services/speed.py", True),  # the model the refit runs
    ("core/serving.py", True),
    ("cli/app.py", False),  # a shell the refit never loads
    ("web/app.py", False),
])
def test_an_edit_to_what_the_refit_reads_makes_the_folds_stale(package_copy, edit, stale):
    path = package_copy / edit
    path.write_bytes(path.read_bytes() + b"\n# edited\n")
    assert (prebuilt_folds() is None) is stale


def test_a_module_the_refit_loaded_that_is_gone_makes_the_folds_stale(package_copy):
    (package_copy / "services" / "served.py").unlink()
    assert prebuilt_folds() is None


def _rewrite(root: Path, change) -> None:  # type: ignore[no-untyped-def]
    path = root / "data" / "snapshot" / calibrate.FOLDS_FILE
    content = json.loads(path.read_text(encoding="utf-8"))
    change(content)
    path.write_text(json.dumps(content), encoding="utf-8")


def _first(content):  # type: ignore[no-untyped-def]
    return next(iter(content["folds"].values()))


@pytest.mark.parametrize("change", [
    lambda c: c.update(schema=2),
    lambda c: c.update(inputs_sha256="0" * 64),
    lambda c: c.update(modules="validation/calibrate.py"),
    lambda c: c.update(modules=["../outside.py"]),
    lambda c: c.update(folds=[]),
    lambda c: _first(c).update(changed={"vllm.no_such_constant": 1.0}),
    lambda c: _first(c).update(changed={"vllm.prefill_efficiency": "0.5"}),
    lambda c: _first(c).update(changed={"vllm.prefill_efficiency": 1}),  # an int: not what build_folds wrote
    lambda c: _first(c).update(prior=["vllm.no_such_row"]),
    lambda c: _first(c).pop("prior"),
], ids=["schema", "digest", "modules-not-a-list", "module-outside", "folds-not-a-table", "unknown-constant",
        "text-value", "int-value", "unknown-row", "no-prior"])
def test_a_malformed_folds_file_is_not_read(package_copy, change):
    _rewrite(package_copy, change)
    assert prebuilt_folds() is None


@pytest.mark.parametrize("body", [b"", b"{", b"\xff\xfe", b"[]", b"{}"])
def test_a_folds_file_that_is_not_its_json_is_not_read(package_copy, body):
    (package_copy / "data" / "snapshot" / calibrate.FOLDS_FILE).write_bytes(body)
    assert prebuilt_folds() is None


def test_a_folds_file_past_its_size_cap_is_not_read(package_copy, monkeypatch):
    monkeypatch.setattr(calibrate, "FOLDS_MAX_BYTES", 100)
    assert prebuilt_folds() is None


@pytest.mark.parametrize("kind,runtime", [("prefill", "llama.cpp"), ("decode", "ollama"),
                                          ("aggregate_decode", "llama.cpp")])
def test_validate_refits_where_the_folds_are_stale_and_reports_the_same(monkeypatch, kind, runtime):
    """The report from the prebuilt folds is the report from refitting each fold (calibrate.Refit), record
    for record; with the folds stale, validate refits."""
    fresh = validate.validate(kind, runtime).to_json()
    refits = []

    class Spy(Refit):
        def __init__(self, *a, **k):  # type: ignore[no-untyped-def]
            refits.append(a[1] if len(a) > 1 else k["leave_out"])
            super().__init__(*a, **k)

    monkeypatch.setattr(calibrate, "prebuilt_folds", lambda: None)
    monkeypatch.setattr(calibrate, "Refit", Spy)
    assert validate.validate(kind, runtime).to_json() == fresh
    assert refits  # it did refit


# ---------------------------------------------------------------- prebuilt benchmark runs


def test_the_shipped_runs_are_fresh():
    """Rebuild with `python scripts/build_catalog.py` after changing core/ or catalog/ code."""
    assert validate.prebuilt_runs() is not None


def _served(runtime: str, n: int) -> list[dict]:
    return [r for r in validate.load_records("serving", runtime)][:n]


@pytest.mark.parametrize("runtime,n", [("sglang", 36), ("tgi", 24), ("vllm", 12), ("trtllm", 12)])
def test_a_prebuilt_run_is_what_the_benchmark_steps(monkeypatch, runtime, n):
    """Each run a record's prediction steps, stepped here (core/serving.py benchmark), is the file's, field
    for field; every run it steps is in the file."""
    from cardfit.validation import serving as deploy

    live: dict = {}
    deploy._bench.cache_clear()
    token = deploy.BENCH_RUNS.set(live)
    try:
        for r in _served(runtime, n):
            validate.predict(r)
    finally:
        deploy.BENCH_RUNS.reset(token)
        deploy._bench.cache_clear()
    built = validate.prebuilt_runs()
    assert live and built is not None
    for key, run in live.items():
        assert built[key] == run, key


@pytest.mark.parametrize("edit,stale", [
    ("core/serving.py", True),  # the code a run executes
    ("core/speed.py", True),
    ("catalog/records.py", True),
    ("data/gpus.toml", True),  # a catalog core/ may read
    ("services/deploy.py", False),  # builds the replica: its fields are the run's key
    ("data/validation/serving.toml", False),  # read by services only
])
def test_an_edit_to_the_code_a_run_executes_makes_the_runs_stale(package_copy, edit, stale):
    path = package_copy / edit
    path.write_bytes(path.read_bytes() + b"\n# edited\n")
    assert (validate.prebuilt_runs() is None) is stale


def _edit_runs(root: Path, change) -> None:  # type: ignore[no-untyped-def]
    path = root / "data" / "snapshot" / validate.RUNS_FILE
    content = json.loads(path.read_text(encoding="utf-8"))
    change(content)
    path.write_text(json.dumps(content), encoding="utf-8")


def _a_run(content):  # type: ignore[no-untyped-def]
    return next(iter(content["runs"]))


@pytest.mark.parametrize("change", [
    lambda c: c.update(schema=2),
    lambda c: c.update(modules_sha256="0" * 64),
    lambda c: c.update(runs=[]),
    lambda c: c["runs"].update({_a_run(c): [1.0] * 5}),
    lambda c: c["runs"].update({_a_run(c): [1.0] * 5 + ["1.0"]}),
    lambda c: c["runs"].update({_a_run(c): [1.0] * 5 + [1]}),
], ids=["schema", "digest", "runs-not-a-table", "short", "text-value", "int-value"])
def test_a_malformed_runs_file_is_not_read(package_copy, change):
    _edit_runs(package_copy, change)
    assert validate.prebuilt_runs() is None


@pytest.mark.parametrize("body", [b"", b"{", b"\xff\xfe", b"[]", b"{}"])
def test_a_runs_file_that_is_not_its_json_is_not_read(package_copy, body):
    (package_copy / "data" / "snapshot" / validate.RUNS_FILE).write_bytes(body)
    assert validate.prebuilt_runs() is None


@pytest.mark.parametrize("runtime", ["sglang", "tgi"])
def test_validate_steps_the_runs_where_they_are_stale_and_reports_the_same(monkeypatch, runtime):
    from cardfit.core import serving

    fresh = validate.validate("serving", runtime).to_json()
    stepped = []
    real = serving.benchmark
    monkeypatch.setattr(validate, "prebuilt_runs", lambda: None)
    monkeypatch.setattr(serving, "benchmark", lambda *a, **k: stepped.append(1) or real(*a, **k))
    from cardfit.validation import serving as deploy

    deploy._bench.cache_clear()
    assert validate.validate("serving", runtime).to_json() == fresh
    assert stepped  # it did step them
