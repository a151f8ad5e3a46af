"""TensorRT-LLM 1.2.1 is the current release (data/releases.toml trtllm `current`, audited 2026-12-07:
docs/VALIDATION.md "TensorRT-LLM 1.2.1"). No default cardfit reads moved from 1.2.0, so 1.2.1 adds no
feature row: `--runtime trtllm` and `trtllm@1.2.1` agree, and `trtllm@1.2.0` answers as `trtllm` did when
1.2.0 was current (the only difference is the release named: the image tag deploy prints)."""

from dataclasses import fields

import pytest

from cardfit.catalog.releases import at_release, current_release, release_table
from cardfit.catalog.runtimes import default_runtimes


def _profile(rel: str):
    return at_release(default_runtimes().get("trtllm"), rel)


def _values(rt) -> dict:
    return {f.name: getattr(rt, f.name) for f in fields(rt) if f.name != "release"}


def test_the_current_release_is_1_2_1():
    assert current_release("trtllm") == "1.2.1"
    # no feature of the table is dated from 1.2.1: nothing 1.2.0 lacks that 1.2.1 has
    table = release_table()["trtllm"]
    assert all(f.from_ != "1.2.1" for f in table.features)


@pytest.mark.parametrize("rel", ["", "1.2.1", "1.2.0"])
def test_the_profile_is_the_same_at_1_2_0_and_1_2_1(rel):
    """Every profile field and constant cardfit reads for trtllm is the same at 1.2.0, at 1.2.1 and at the
    current release (none of the table's features falls between them)."""
    now = _profile("")
    at = _profile(rel)
    assert _values(at) == _values(now)
    assert at.release.lacks == now.release.lacks == frozenset()


def test_older_releases_still_differ():
    """The table is still read: 0.17 (before the PyTorch backend was trtllm-serve's default) lacks it."""
    assert "pytorch_backend" in _profile("0.17").release.lacks


@pytest.mark.parametrize("args", [
    ("speed", "llama-3.1-8b", "--gpu", "H100", "--concurrency", "1,16,256"),
    ("speed", "qwen3-30b-a3b", "--gpu", "H100", "--concurrency", "1,32"),
])
def test_trtllm_and_its_releases_answer_alike(run_json, args):
    answers, named = {}, {}
    for name in ("trtllm", "trtllm@1.2.1", "trtllm@1.2.0"):
        js = run_json(*args, "--runtime", name)
        named[name] = (js.pop("runtime"), js.pop("release"))
        answers[name] = js
    assert answers["trtllm"] == answers["trtllm@1.2.1"] == answers["trtllm@1.2.0"]
    assert named["trtllm"][1] == named["trtllm@1.2.1"][1] == "1.2.1"
    assert named["trtllm@1.2.0"][1] == "1.2.0"
