"""Engine releases as data (data/releases.toml, catalog/releases.py): one parser, one meaning of "release not
stated", one profile_at, and `--runtime NAME@RELEASE` in every command and in the web API."""

from __future__ import annotations

import pytest

from cardfit.catalog.releases import check_table, parse_release, release, release_table
from cardfit.catalog.runtimes import KEYS, default_runtimes
from cardfit.core.constants import constants, fitted
from cardfit.errors import InputError

# (runtime, as a source or a user writes it, (number, line)): strings of data/validation's records
PARSED = [
    # a fourth number and .postN order after the release they follow (the DP chunk split: 0.4.4.post1)
    ("vllm", "0.10.1.1", ((0, 10, 1, 1), "")),
    ("vllm", "v0.7.3", ((0, 7, 3), "")),
    ("vllm", "~0.6.4 (rocm/vllm-dev)", ((0, 6, 4), "")),
    ("vllm", "0.8.2 (V0 engine)", ((0, 8, 2), "")),
    ("vllm", "0.6.3.dev116+g151ef4ef", ((0, 6, 3), "")),
    ("trtllm", "1.0.0rc3", ((1, 0, 0), "")),
    ("trtllm", "1.2.0rc6.post3", ((1, 2, 0), "")),
    ("trtllm", "NIM 1.8.0 (TensorRT-LLM engine)", ((1, 8, 0), "nim")),
    ("sglang", "0.5.6.post2", ((0, 5, 6, 2), "")),
    ("sglang", "0.4.4.post1", ((0, 4, 4, 1), "")),
    ("llama.cpp", "b3622", ((3622,), "")),
    ("llama.cpp", "93bc3839 (3622)", ((3622,), "")),
    ("ollama", "b3622", None),  # a llama.cpp build, not an Ollama release (0.3.3)
    ("vllm", "main, Jan 2025", None),
    ("vllm", "not stated", None),
]


@pytest.mark.parametrize("runtime,text,want", PARSED)
def test_one_parser_reads_every_way_a_release_is_written(runtime: str, text: str, want: object) -> None:
    assert parse_release(runtime, text) == want


# (runtime, release, date, features on, features off)
FEATURES = [
    ("vllm", "0.5.3", None, set(), {"overlap_scheduler", "v1_engine"}),
    ("vllm", "0.6.3", None, {"overlap_scheduler"}, {"v1_engine", "async_scheduling"}),
    ("vllm", "0.10.1.1", None, {"v1_engine", "overlap_scheduler"}, {"async_scheduling", "graphs_in_budget"}),
    ("vllm", "0.14.1", None, {"async_scheduling"}, {"graphs_in_budget"}),
    # the wheels: graph profiling and the 0.92 default from 0.20.0 (the log line says 0.21), the releases
    # after 0.24.0 each change a default (data/releases.toml), none of them on at 0.24.0
    ("vllm", "0.19.1", None, {"async_scheduling"}, {"graphs_in_budget", "utilization_092"}),
    ("vllm", "0.20.0", None, {"graphs_in_budget", "utilization_092"}, {"rocm_graphs_in_budget"}),
    ("vllm", "0.24.0", None, {"graphs_in_budget", "async_scheduling", "v1_engine", "utilization_092"},
     {"mxfp4_scales_freed", "rocm_graphs_in_budget", "trtllm_mxfp4_pad_128", "batch_16k_above_160gib",
      "graphs_1024_sm100"}),
    ("vllm", "0.25.1", None, {"mxfp4_scales_freed"}, {"rocm_graphs_in_budget"}),
    ("vllm", "0.27.1", None, {"rocm_graphs_in_budget", "trtllm_mxfp4_pad_128"}, {"batch_16k_above_160gib"}),
    ("vllm", "0.33.0", None, {"batch_16k_above_160gib", "graphs_1024_sm100", "mxfp4_scales_freed"},
     {"extensible_kv_cache", "kv_block_64"}),
    ("vllm", "0.34.0", None, {"extensible_kv_cache", "kv_block_64", "graphs_1024_sm100"}, set()),
    ("vllm", "0.8.2 (V0 engine)", None, {"overlap_scheduler"}, {"v1_engine"}),
    ("vllm", "0.7.3 (V1)", None, {"v1_engine"}, set()),
    # not stated: the release current at the record's date; neither: the current release
    ("vllm", None, "2024-08-15", set(), {"overlap_scheduler"}),
    ("vllm", None, "2025-04", {"v1_engine"}, {"async_scheduling"}),
    ("vllm", None, None, {"graphs_in_budget", "async_scheduling"}, set()),
    ("vllm", "2024-08", None, set(), {"overlap_scheduler"}),
    ("trtllm", "NIM 1.8.0", None, set(), {"pytorch_backend", "overlap_executor"}),
    ("trtllm", "0.15.0", None, set(), {"pytorch_backend"}),
    ("trtllm", "1.0.0rc3", None, {"pytorch_backend", "overlap_executor"}, set()),
    ("llama.cpp", "b2000", None, set(), {"cuda_graphs", "mmq"}),
    ("llama.cpp", "b3100", None, {"cuda_graphs"}, {"mmq"}),
    ("sglang", "0.3.6", None, set(), {"overlap_scheduler"}),
]


@pytest.mark.parametrize("runtime,stated,date,on,off", FEATURES)
def test_a_release_has_the_features_of_the_table(runtime: str, stated: str | None, date: str | None,
                                                  on: set[str], off: set[str]) -> None:
    rel = release(runtime, stated, date)
    assert on <= rel.features
    assert not (off & rel.features)


def test_the_table_names_runtime_fields_and_runtimes() -> None:
    check_table({r.id for r in default_runtimes()}, set(KEYS))
    for rr in release_table().values():
        assert rr.source.startswith("https://")
        for f in rr.features:
            assert f.source and f.what and f.date


def test_profile_at_sets_the_older_engines_fields_and_reads_its_constants() -> None:
    runtimes = default_runtimes()
    now, v0, v1_sync = runtimes.get("vllm"), runtimes.get("vllm@0.5.3"), runtimes.get("vllm@0.10.1")
    assert now.release is None and not now.prefill_first and now.prefix_caching
    assert v0.prefill_first and not v0.prefix_caching and v0.prefill_graph_tokens == 0
    assert v0.sampler_bytes_per_logit == now.sampler_bytes_per_logit_v0
    assert v0.cuda_graph_bytes == 0  # captured outside the budget before 0.21
    per_seq = "decode_overhead_us_per_sequence"
    assert fitted(v0, per_seq, "cuda") == now.decode_overhead_us_per_sequence_v0
    # V1 before async scheduling pays its synchronous loop on CUDA cards only
    assert fitted(v1_sync, per_seq, "cuda") == now.decode_overhead_us_per_sequence_sync
    assert fitted(v1_sync, per_seq, "rocm") == now.decode_overhead_us_per_sequence
    # a validation fold's refit of the renamed constant reaches the release that reads it
    with constants({"vllm.decode_overhead_us_per_sequence_sync": 12.5}):
        assert fitted(v1_sync, per_seq, "cuda") == 12.5
    trt = runtimes.get("trtllm@NIM 1.8.0")
    assert trt.serial_gemm and trt.prefill_overhead_us_per_layer == 0 and trt.schedule_ahead_steps == 0
    with constants({"trtllm.prefill_overhead_us_per_layer": 800.0}):  # set outright, not refit
        assert fitted(trt, "prefill_overhead_us_per_layer") == 0


@pytest.fixture
def sglang_current_0519(monkeypatch: pytest.MonkeyPatch):
    """The table with SGLang's `current` set back to 0.5.19, so that its tier_35gib_4k_48 (from 0.5.20,
    python/sglang/srt/arg_groups/memory_hook.py of the 0.5.20 wheel: data/releases.toml) is a feature listed
    ahead of the current release, as a feature of a release cardfit has not moved `current` to yet is."""
    from dataclasses import replace

    from cardfit.catalog import releases, runtimes

    table = dict(release_table())
    table["sglang"] = replace(table["sglang"], current="0.5.19")
    runtimes._current_release.cache_clear()
    releases._at.cache_clear()
    monkeypatch.setattr(releases, "release_table", lambda: table)
    yield
    runtimes._current_release.cache_clear()
    releases._at.cache_clear()


def test_a_profile_that_names_no_release_answers_as_the_current_release(sglang_current_0519) -> None:
    """One way to ask a release for a feature (issue 24 item 2): a registry profile (`--runtime sglang`, no
    '@') is the current release's, so a feature listed ahead of `current` is one it lacks, as the current
    release and the profile at it answer (before: RuntimeProfile.has said True for every feature of a profile
    that named no release)."""
    from cardfit.catalog.releases import at_release
    from cardfit.catalog.runtimes import TIER_35GIB_BEFORE_0520, tier_of

    rt = default_runtimes().get("sglang")
    assert rt.release is None
    assert not release("sglang").has("tier_35gib_4k_48")
    assert not rt.has("tier_35gib_4k_48")
    assert not at_release(rt, "").has("tier_35gib_4k_48")
    assert rt.has("graph_flags_by_phase")  # from 0.5.14: the current 0.5.19 has it
    assert tier_of(rt, 24 * 1024) == TIER_35GIB_BEFORE_0520  # an RTX 4090 takes 0.5.19's row
    # a profile at a stated release answers as that release, whatever `current` is
    assert default_runtimes().get("sglang@0.5.20").has("tier_35gib_4k_48")


def test_a_registry_profile_is_the_current_releases_profile() -> None:
    """A profile that names no release answers every feature as the current release does, and holds the
    fields the profile at the current release holds (runtimes.toml describes the current release: a feature
    listed ahead of it must not leave its row in the state after it)."""
    from dataclasses import fields

    from cardfit.catalog.releases import at_release

    skip = {"release", "reads", "pinned"}
    for rid, table in release_table().items():
        rt = default_runtimes().get(rid)
        now, at = release(rid), at_release(rt, "")
        for f in table.features:
            assert rt.has(f.id) == now.has(f.id) == at.has(f.id), (rid, f.id)
        differ = [f.name for f in fields(rt)
                  if f.name not in skip and getattr(rt, f.name) != getattr(at, f.name)]
        assert not differ, f"{rid}: runtimes.toml differs from its current release in {differ}"


# Ollama's releases by number (data/releases.toml: its features name the release they came in; the tags'
# envconfig/config.go and server/sched.go): (release, features it has, features it lacks)
@pytest.mark.parametrize("name,has,lacks", [
    ("ollama@0.1.34", (), ("cuda_graphs", "mmq", "auto_parallel")),  # llama.cpp 952d03db, NumParallel = 1
    ("ollama@0.1.48", ("cuda_graphs",), ("mmq", "auto_parallel")),
    ("ollama@0.3.3", ("cuda_graphs", "mmq", "auto_parallel"), ("auto_parallel_2", "parallel_default_one")),
    ("ollama@0.6.6", ("auto_parallel",), ("auto_parallel_2", "parallel_default_one")),  # defaultParallel 4
    ("ollama@0.6.7", ("auto_parallel", "auto_parallel_2"), ("parallel_default_one",)),  # defaultParallel 2
    ("ollama@0.9.6", ("auto_parallel_2",), ("parallel_default_one",)),
    ("ollama@0.10.0", ("auto_parallel", "parallel_default_one"), ()),  # NumParallel = 1 again
    ("ollama@2024-08-05", ("auto_parallel",), ("parallel_default_one",)),  # the release current then
])
def test_ollama_releases_by_number(name: str, has: tuple[str, ...], lacks: tuple[str, ...]) -> None:
    rel = default_runtimes().get(name).release
    assert all(rel.has(f) for f in has) and not any(rel.has(f) for f in lacks), rel


@pytest.mark.parametrize("name,message", [
    ("vllm@", "name a release after '@'"),
    ("vllm@banana", "is not a vllm release"),
    ("ollama@banana", "is not a ollama release"),
    ("transformers@4.45", "knows no releases"),
])
def test_a_release_that_cannot_be_read_is_a_clear_error(name: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        default_runtimes().get(name)


def test_plan_names_the_release_it_planned(run_cli, run_json) -> None:
    code, old, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "H100", "--runtime", "vllm@0.6.3")
    assert code == 0 and "runtime vllm 0.6.3 ·" in old
    code, now, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "H100", "--runtime", "vllm")
    assert code == 0 and "runtime vllm 0.34.0 ·" in now
    js = run_json("plan", "llama-3.1-8b", "--gpu", "H100", "--runtime", "vllm@0.6.3")
    assert js["inputs"]["release"] == "0.6.3"


def test_v0_profiles_a_whole_max_model_len_prefill(run_json) -> None:
    """vLLM V0 without chunked prefill (max_model_len <= 32K) profiles max(max_model_len, 2048) tokens
    (item 6): a 29,000-token context takes a larger activation peak than V1's card-sized budget."""
    args = ["plan", "llama-3.1-8b", "--gpu", "RTX 4090", "--quant", "fp8", "--context", "29000"]
    old = run_json(*args, "--runtime", "vllm@0.6.3")["memory"]["activation_bytes"]
    # V1's profile peak alone: 0.33.0 (from 0.34.0 the line also holds the graph estimate and the margin a
    # KV cache sized from measured memory keeps free, data/releases.toml extensible_kv_cache)
    now = run_json(*args, "--runtime", "vllm@0.33.0")["memory"]["activation_bytes"]
    assert old > 2.5 * now


def test_every_serving_command_takes_a_release(run_cli, run_json) -> None:
    load = ["--input-tokens", "1000", "--output-tokens", "200"]
    speed = {r: run_json("speed", "llama-3.1-8b", "--gpu", "H100", "--runtime", r, *load)
             for r in ("vllm@0.5.3", "vllm")}
    assert speed["vllm@0.5.3"]["runtime"] == "vllm@0.5.3"
    slow, fast = (max(row["aggregate_tokens_per_s"] for row in speed[r]["rows"])
                  for r in ("vllm@0.5.3", "vllm"))
    assert slow < fast  # vLLM before 0.6 ran its scheduler between GPU steps
    deploy = run_json("deploy", "llama-3.1-8b", "--gpu", "H100", "--runtime", "vllm@0.5.3", "--users", "32")
    assert deploy["best"]["runtime"] == "vllm@0.5.3"
    for args in (["max-context", "llama-3.1-8b", "--gpu", "H100"],
                 ["max-sequences", "llama-3.1-8b", "--gpu", "H100", "--context", "8192"]):
        assert run_json(*args, "--runtime", "vllm@0.6.3")["runtime"] == "vllm@0.6.3"
    code, out, err = run_cli("plan", "llama-3.1-8b", "--runtime", "vllm@x")
    assert code != 0 and "Traceback" not in err and "not a vllm release" in err


def test_the_web_api_takes_a_release() -> None:
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    client = TestClient(create_app())
    r = client.post("/api/plan", json={"model": "llama-3.1-8b", "gpu": "H100", "runtime": "vllm@0.6.3"})
    assert r.status_code == 200 and r.json()["inputs"]["release"] == "0.6.3"
    bad = client.post("/api/plan", json={"model": "llama-3.1-8b", "runtime": "vllm@zz"})
    assert bad.status_code == 400 and "not a vllm release" in bad.json()["error"]


@pytest.mark.parametrize("runtime,stated,date,want", [
    ("vllm", "0.10.1.1", "2025-09-01", "vllm@0.10.1.1"),  # a stated release wins over the date
    ("vllm", "not stated", "2025-10-29", "vllm@2025-10-29"),  # not stated: the release of its date
    ("vllm", "", "", "vllm"),  # neither: the current release
    ("trtllm", "0.17.post1.dev (pytorch backend)", "2025-03-18", "trtllm@0.17.post1.dev (pytorch backend)"),
    ("trtllm", "(tensorrt backend)", "", "trtllm@1.2.1 ((tensorrt backend))"),  # words on the current one
    ("tgi", "2.3.1", "2024-10-01", "tgi"),  # a runtime whose releases cardfit does not know
])
def test_a_record_is_the_runtime_a_user_would_name(runtime, stated, date, want):
    from cardfit.catalog.releases import question_runtime

    assert question_runtime(runtime, stated, date) == want
    assert default_runtimes().get(want).id == runtime
