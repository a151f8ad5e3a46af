"""--cuda-graph-max-bs N: the largest decode batch an engine replays as a CUDA graph, an engine setting a
pinned deploy and speed take (services/inputs.py ENGINE_OPTIONS) in place of the engine's own cap (SGLang's
by card size and TP: catalog/runtimes.py graph_max_batch). A larger decode batch launches every kernel
(SGLang model_executor/cuda_graph_runner.py CudaGraphRunner.can_run: "cuda_graph_bs <= self.max_bs";
core/speed.py per_layer_s). Launched as SGLang's --cuda-graph-max-bs or TensorRT-LLM's cuda_graph_config;
validation passes a record's stated cap (aiconfigurator's SGLang runs: every batch up to the run's own
captured)."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

import cardfit
from cardfit.core import serving as sv
from cardfit.errors import InputError
from cardfit.runtimes import launch
from cardfit.services.deploy import DeployInput, pinned_answer
from cardfit.validation.serving import pinned_settings, record_input
from cardfit.validation.validate import all_records, path_of, predict

OPTIONS = Path(__file__).parent / "data" / "runtime_options"


def _pinned(gpu: str, tp: int, users: int, cap: int | None, model: str = "llama-3.1-8b"):
    return pinned_answer(DeployInput(model=model, gpu=(gpu,), runtime="sglang", tp=tp, quant="fp8",
                                     users=users, input_tokens=1000, output_tokens=1000,
                                     cuda_graph_max_bs=cap))


# (card, tp, users, --cuda-graph-max-bs, the cap the engine runs with, why the case is tricky)
CASES = [
    ("H200 SXM", 1, 352, None, 256, "SGLang's own cap on a 141 GB card below TP 4 (server_args.py): 256"),
    ("H200 SXM", 1, 352, 352, 352, "aiconfigurator's generator captures up to the run's batch: none eager"),
    ("H200 SXM", 1, 64, 32, 32, "a cap below the batch: the decode steps run eagerly"),
    ("H200 SXM", 1, 64, None, 256, "the default holds 64 sequences in the graph"),
    ("H100 SXM", 4, 352, None, 512, "TP 4 on an 80 GB card: 512 by default"),
    ("H100 SXM", 4, 352, 300, 300, "a cap set below the default, and below the batch"),
]


@pytest.mark.parametrize("gpu,tp,users,cap,runs_with,why", CASES)
def test_a_stated_cap_sets_which_decode_steps_run_eagerly(gpu, tp, users, cap, runs_with, why):
    """The replica the pinned deploy times carries the cap, and its decode-only step at the load is the graph
    replay's when the batch fits the cap, else longer by layers x (eager - replay) per-layer time (SGLang's
    eager step: runtimes.toml decode_overhead_us_per_layer_v0)."""
    res = _pinned(gpu, tp, users, cap).result
    r = res.cand.replica
    mc = r.machine
    assert mc.graph_max_batch == runs_with, why
    batch = res.served.batch
    graphs = replace(r, machine=replace(mc, graph_max_batch=0))  # every batch a graph
    gap = sv.step_s(r, batch, 0.0) - sv.step_s(graphs, batch, 0.0)
    eager = -(-batch // 1) > runs_with
    want = r.load.layers * (mc.overhead_s_per_layer_eager - mc.overhead_s_per_layer) if eager else 0.0
    assert gap == pytest.approx(want, rel=1e-6, abs=1e-12), why


def test_the_cap_moves_tpot_and_throughput_through_the_one_timing_path():
    """deploy --json and speed agree with the cap as without it; a cap that fits the batch is faster."""
    kw = dict(model="llama-3.1-8b", gpu=("H200 SXM",), runtime="sglang", tp=1, users=352, input_tokens=1000,
              output_tokens=1000, quant="fp8")
    eager = (d := cardfit.deploy(**kw))["best"] or d["closest"]
    graph = (d := cardfit.deploy(**kw, cuda_graph_max_bs=352))["best"] or d["closest"]
    assert graph["tpot_ms"] < eager["tpot_ms"]
    assert graph["aggregate_tokens_per_s"] > eager["aggregate_tokens_per_s"]
    # SGLang 0.5.23 (current) names the decode graphs' cap --cuda-graph-max-bs-decode (releases.toml
    # graph_flags_by_phase)
    assert "--cuda-graph-max-bs-decode 352" in graph["command"]
    assert "--cuda-graph-max-bs" not in eager["command"]
    rows = cardfit.speed(model="llama-3.1-8b", gpu="H200 SXM", runtime="sglang", quant="fp8",
                         input_tokens=1000, output_tokens=1000, concurrency=(352,), cuda_graph_max_bs=352)
    row = rows["rows"][0]
    assert row["aggregate_tokens_per_s"] == pytest.approx(graph["aggregate_tokens_per_s"], rel=0.02)


def test_sglang_launch_flag_exists_in_the_release_cardfit_names():
    """--cuda-graph-max-bs-decode at the current release (0.5.23: the old --cuda-graph-max-bs is gone from
    0.5.20; tests/test_sglang_newer_releases.py has the older releases' flag)."""
    cmd = launch.build("sglang", "meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096, max_num_seqs=352,
                       cuda_graph_max_bs=352)
    args = list(cmd.argv)
    assert args[args.index("--cuda-graph-max-bs-decode") + 1] == "352"
    flags = tomllib.loads((OPTIONS / "sglang.toml").read_text())["flags"]
    assert "--cuda-graph-max-bs-decode" in flags and "--cuda-graph-max-bs" not in flags


def test_trtllm_cap_goes_in_its_yaml_with_padding_beside_the_kv_dtype():
    """TensorRT-LLM takes CudaGraphConfig from the LLM API options file (--config): one file, one flag."""
    cmd = launch.build("trtllm", "nvidia/Llama-3.1-8B-Instruct-FP8", max_model_len=4096, max_num_seqs=256,
                       kv_dtype="fp8", checkpoint_quantized=True, cuda_graph_max_bs=256)
    assert cmd.files == (("cardfit-trtllm.yaml", "kv_cache_config:\n  dtype: fp8\ncuda_graph_config:\n"
                                                 "  max_batch_size: 256\n  enable_padding: true\n"),)
    assert cmd.argv.count("--config") == 1
    plain = launch.build("trtllm", "m", max_model_len=4096, cuda_graph_max_bs=8)
    assert plain.files == (("cardfit-trtllm.yaml", "cuda_graph_config:\n  max_batch_size: 8\n"
                                                   "  enable_padding: true\n"),)
    assert list(plain.argv[-2:]) == ["--config", "cardfit-trtllm.yaml"]
    flags = tomllib.loads((OPTIONS / "trtllm-serve.toml").read_text())["flags"]
    assert "--config" in flags


@pytest.mark.parametrize("runtime", ["vllm", "llama.cpp", "ollama"])
def test_launch_refuses_a_cap_the_engine_has_no_setting_for(runtime):
    with pytest.raises(InputError, match="no CUDA-graph batch cap"):
        launch.build(runtime, "m", max_model_len=4096, cuda_graph_max_bs=8)


@pytest.mark.parametrize("command,args,message", [
    ("deploy", ["--gpu", "H100 SXM", "--runtime", "sglang"],
     "--cuda-graph-max-bs applies to one pinned deployment"),
    ("deploy", ["--gpu", "H100 SXM", "--runtime", "vllm", "--tp", "1"],
     "--cuda-graph-max-bs is an SGLang and TensorRT-LLM setting"),
    ("deploy", ["--gpu", "H100 SXM", "--runtime", "trtllm@0.20", "--tp", "1"],
     "this release of trtllm has no eager decode step"),
    ("deploy", ["--gpu", "H100 SXM", "--runtime", "sglang", "--tp", "1", "--cuda-graph-max-bs", "0"],
     "--cuda-graph-max-bs must be greater than or equal to 1"),
    ("speed", ["--gpu", "H100 SXM", "--runtime", "llama.cpp", "--quant", "Q4_K_M", "--input-tokens", "1000"],
     "--cuda-graph-max-bs sets the engine of a served load"),
])
def test_the_option_is_refused_where_no_engine_takes_it(run_cli, command, args, message):
    extra = [] if "--cuda-graph-max-bs" in args else ["--cuda-graph-max-bs", "64"]
    load = ["--users", "8"] if command == "deploy" else []
    code, out, err = run_cli(command, "llama-3.1-8b", *load, *args, *extra)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err
    assert "Traceback" not in err and out == ""


# aiconfigurator 0.12.0's generator writes cuda_graph_batch_sizes = range(1, max_batch_size + 1) for both
# engines (generator/rule_plugin/benchmark/sglang.rule and trtllm.rule): each run captured every batch up to
# its own, stated as an assumed setting, so the records stay on their path (a setting deploy takes). SGLang
# takes it as --cuda-graph-bs (its largest is cuda_graph_max_bs: server_args.py); TensorRT-LLM as
# cuda_graph_config batch_sizes with enable_padding false (generator/config/backend_templates/trtllm/
# extra_engine_args.*.yaml.j2), not its default sizes (1-31, 32, 64, 128: tensorrt_llm/llmapi/llm_args.py
# CudaGraphConfig): the cap is the run's own batch, so no TensorRT-LLM decode step leaves a graph and no
# prediction moves.
@pytest.mark.parametrize("runtime, count, same_prediction", [
    ("sglang", 14, False),
    ("trtllm", 80, True),  # serving.toml 30, serving_aic_dp_ep.toml 50
])
def test_aiconfigurator_records_pass_their_batch_as_the_cap(runtime, count, same_prediction):
    seen = 0
    for r in all_records():
        if not (r["id"].startswith("aic-") and r.get("runtime") == runtime and "max_batch_size" in
                r.get("settings", {})):
            continue
        st = r["settings"]
        inp, tp, _ = record_input(r)
        assert inp.cuda_graph_max_bs == st["max_batch_size"] == st["cuda_graph_max_bs"], r["id"]
        assert "cuda_graph_max_bs" in r["assumed"] and "cuda_graph_max_bs" in pinned_settings(st, tp)
        without = {**r, "settings": {k: v for k, v in st.items() if k != "cuda_graph_max_bs"}}
        assert path_of(r) == path_of(without), r["id"]
        if same_prediction:
            assert predict(r).predicted == predict(without).predicted, r["id"]
        seen += 1
    assert seen == count
