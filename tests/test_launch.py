"""Launch commands: every flag cardfit emits exists in the real tool (option lists in
tests/data/runtime_options/, each naming its release and source), and the values say what the plan says."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest

from cardfit.errors import InputError
from cardfit.runtimes import launch

OPTIONS = Path(__file__).parent / "data" / "runtime_options"
TOOL_FILE = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm-serve", "llama.cpp": "llama-server",
             "ollama": "ollama"}


def options(runtime: str) -> dict:
    return tomllib.loads((OPTIONS / f"{TOOL_FILE[runtime]}.toml").read_text())


# (runtime, model, options, why this case is tricky)
CASES = [
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct",
     dict(quant="bf16", max_model_len=8192, max_num_seqs=256, gpu_memory_utilization=0.9),
     "the plain single-card case"),
    ("vllm", "meta-llama/Llama-3.1-70B-Instruct",
     dict(quant="fp8", tp=8, pp=2, nodes=2, max_model_len=131072, max_num_seqs=64, kv_dtype="fp8",
          gpu_memory_utilization=0.92, max_batched_tokens=8192),
     "PP across two nodes, online FP8, FP8 KV"),
    ("vllm", "openai/gpt-oss-120b", dict(quant="mxfp4", max_model_len=131072, max_num_seqs=128),
     "a checkpoint-native format takes no --quantization"),
    ("sglang", "Qwen/Qwen3-30B-A3B", dict(quant="fp8", tp=2, max_model_len=32768, max_num_seqs=128,
                                         kv_dtype="fp8", gpu_memory_utilization=0.85),
     "SGLang spells FP8 KV fp8_e4m3"),
    ("sglang", "deepseek-ai/DeepSeek-R1", dict(quant="fp8", tp=8, pp=2, nodes=2, max_model_len=65536,
                                              max_num_seqs=32, checkpoint_quantized=True,
                                              max_batched_tokens=4096),
     "an FP8 checkpoint: no --quantization, which would contradict its config"),
    ("trtllm", "nvidia/Llama-3.1-8B-Instruct-FP8",
     dict(quant="fp8", max_model_len=4096, max_num_seqs=288, kv_dtype="fp8", gpu_memory_utilization=0.9,
          max_batched_tokens=8192, checkpoint_quantized=True),
     "TensorRT-LLM takes the KV dtype from a YAML file"),
    ("llama.cpp", "models/Llama-3.1-8B-Instruct-Q4_K_M.gguf",
     dict(quant="Q4_K_M", max_model_len=8192, max_num_seqs=4, kv_dtype="q8_0"),
     "-c is all slots together; q8_0 V cache forces flash attention"),
    ("llama.cpp", "ggml-org/gpt-oss-120b-GGUF",
     dict(quant="mxfp4", max_model_len=32768, max_num_seqs=1, cpu_moe_layers=24, n_gpu_layers=37,
          flash_attn=True),
     "experts of 24 layers in system RAM"),
    ("ollama", "qwen3:8b", dict(quant="Q4_K_M", max_model_len=32768, max_num_seqs=4, kv_dtype="q8_0"),
     "Ollama is configured through its environment"),
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct",
     dict(quant="bf16", tp=2, max_model_len=8192, max_num_seqs=256, replicas=4, one_node=True),
     "four TP-2 replicas in one node: one server with data parallelism"),
    ("sglang", "meta-llama/Llama-3.1-8B-Instruct",
     dict(quant="bf16", max_model_len=8192, max_num_seqs=256, replicas=8, one_node=True),
     "SGLang's data parallelism is --dp-size"),
    ("vllm", "deepseek-ai/DeepSeek-V3", dict(quant="fp8", tp=8, max_model_len=4096, max_num_seqs=1024,
                                            attention_dp=8, expert_parallel=8, checkpoint_quantized=True),
     "attention DP + EP: --data-parallel-size with --enable-expert-parallel, TP 1 per rank"),
    ("sglang", "deepseek-ai/DeepSeek-V3", dict(quant="fp8", tp=8, max_model_len=4096, max_num_seqs=1024,
                                              attention_dp=4, expert_parallel=8, checkpoint_quantized=True),
     "SGLang's DP attention keeps --tp-size the replica's and adds --ep-size"),
    ("trtllm", "deepseek-ai/DeepSeek-V3", dict(quant="fp8", tp=8, max_model_len=4096, max_num_seqs=1024,
                                              kv_dtype="fp8", attention_dp=8, expert_parallel=8,
                                              checkpoint_quantized=True),
     "TensorRT-LLM: --ep_size, attention DP in the YAML beside the KV dtype, max_batch_size per rank"),
    ("sglang", "deepseek-ai/DeepSeek-V3", dict(quant="fp8", tp=8, max_model_len=8300, max_num_seqs=154,
                                              checkpoint_quantized=True, disaggregation="prefill"),
     "a prefill worker of a disaggregated deployment: --disaggregation-mode prefill"),
    ("vllm", "deepseek-ai/DeepSeek-V3", dict(quant="fp8", tp=8, max_model_len=8300, max_num_seqs=154,
                                            checkpoint_quantized=True, disaggregation="decode"),
     "a decode worker: vLLM takes a KV connector in --kv-transfer-config"),
]


@pytest.mark.parametrize("runtime,model,opts,why", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_flag_exists_in_the_tool(runtime: str, model: str, opts: dict, why: str) -> None:
    known = options(runtime)
    cmd = launch.build(runtime, model, **opts)
    for flag in cmd.flags():
        assert flag in known["flags"], f"{flag} is not an option of {known['tool']} {known['version']}"
    for name, _ in cmd.env:
        assert name in known.get("env", []), f"{name} is not read by {known['tool']}"
    args = list(cmd.argv)
    for flag, allowed in known.get("choices", {}).items():
        if flag in args:
            assert args[args.index(flag) + 1] in allowed, (flag, why)
    for name, value in cmd.env:
        if name in known.get("choices", {}):
            assert value in known["choices"][name]


def test_vllm_values() -> None:
    cmd = launch.build("vllm", "meta-llama/Llama-3.1-70B-Instruct", quant="fp8", tp=8, pp=2, nodes=2,
                       max_model_len=131072, max_num_seqs=64, kv_dtype="fp8", gpu_memory_utilization=0.92)
    assert cmd.shell() == (
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8 --pipeline-parallel-size 2 "
        "--max-model-len 131072 --max-num-seqs 64 --gpu-memory-utilization 0.92 --kv-cache-dtype fp8 "
        "--quantization fp8 --nnodes 2 --node-rank 0 --master-addr HEAD_NODE_IP")
    assert cmd.notes[0].startswith("run the same command on the second node with --node-rank 1")


def test_expert_parallel_values() -> None:
    """vLLM counts TP and the sequence cap per data-parallel rank (each its own engine core); SGLang counts
    them for the whole server and names the expert-parallel size."""
    kw = dict(quant="fp8", tp=8, max_model_len=4096, max_num_seqs=1024, attention_dp=4, expert_parallel=8,
              checkpoint_quantized=True)
    assert launch.build("vllm", "deepseek-ai/DeepSeek-V3", **kw).shell() == (
        "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 2 --max-model-len 4096 --max-num-seqs 256 "
        "--data-parallel-size 4 --enable-expert-parallel")
    # the attention groups as each release spells them (data/releases.toml attn_dp_size_flag, PyPI wheels:
    # 0.5.22 and 0.5.23 arg_groups/fields/parallel.py attn_dp_size, --enable-dp-attention deprecated;
    # 0.5.21 arg_groups/fields/parallel.py enable_dp_attention and no attn_dp_size)
    assert launch.build("sglang", "deepseek-ai/DeepSeek-V3", **kw).shell() == (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
        "--context-length 4096 --max-running-requests 1024 --attn-dp-size 4 --ep-size 8")
    assert launch.build("sglang@0.5.21", "deepseek-ai/DeepSeek-V3", **kw).shell() == (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
        "--context-length 4096 --max-running-requests 1024 --dp-size 4 --enable-dp-attention --ep-size 8")
    # before 0.5.0rc0 --ep-size alone left the MoE layers tensor parallel: 0.4.0.post2 to 0.4.10 ran the
    # experts expert parallel only with --enable-ep-moe (data/releases.toml ep_size_alone; PyPI wheels 0.4.9
    # layers/moe/ep_moe/layer.py get_moe_impl_class, 0.5.0rc0 server_args.py "--enable-ep-moe is deprecated")
    for old in ("sglang@0.4.6", "sglang@0.4.10", "sglang@2025-06"):
        assert launch.build(old, "deepseek-ai/DeepSeek-V3", **kw).shell() == (
            "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
            "--context-length 4096 --max-running-requests 1024 --dp-size 4 --enable-dp-attention "
            "--enable-ep-moe --ep-size 8"), old
    for new in ("sglang@0.5.0rc0", "sglang@0.5.1"):
        assert "--enable-ep-moe" not in launch.build(new, "deepseek-ai/DeepSeek-V3", **kw).shell(), new


def test_trtllm_expert_parallel_yaml() -> None:
    cmd = launch.build("trtllm", "deepseek-ai/DeepSeek-V3", quant="fp8", tp=8, max_model_len=4096,
                       max_num_seqs=1024, kv_dtype="fp8", attention_dp=8, expert_parallel=8,
                       checkpoint_quantized=True)
    args = list(cmd.argv)
    assert args[args.index("--ep_size") + 1] == "8" and args[args.index("--max_batch_size") + 1] == "128"
    yaml = "kv_cache_config:\n  dtype: fp8\nenable_attention_dp: true\n"
    assert cmd.files == (("cardfit-trtllm.yaml", yaml),)


def test_prequantized_checkpoint_gets_no_quantization_flag() -> None:
    for rt in ("vllm", "sglang"):
        assert "--quantization" not in launch.build(rt, "m", quant="fp8", max_model_len=4096,
                                                    checkpoint_quantized=True).argv
        cmd = launch.build(rt, "m", quant="awq", max_model_len=4096)
        assert "--quantization" not in cmd.argv and "quantized as awq" in cmd.notes[0]


def test_llamacpp_context_is_per_slot_times_slots() -> None:
    cmd = launch.build("llama.cpp", "m.gguf", max_model_len=8192, max_num_seqs=4, kv_dtype="q4_0")
    args = list(cmd.argv)
    assert args[args.index("-c") + 1] == "32768" and args[args.index("-np") + 1] == "4"
    assert args[args.index("-fa") + 1] == "on" and args[args.index("-ctv") + 1] == "q4_0"
    assert args[:3] == ["llama-server", "-m", "m.gguf"]
    assert launch.build("llama.cpp", "org/repo-GGUF:Q4_K_M", max_model_len=4096).argv[1] == "-hf"


def test_ollama_environment() -> None:
    cmd = launch.build("ollama", "llama3.1:8b", max_model_len=8192, max_num_seqs=2, kv_dtype="q8_0")
    assert cmd.shell() == ("OLLAMA_CONTEXT_LENGTH=8192 OLLAMA_NUM_PARALLEL=2 OLLAMA_KV_CACHE_TYPE=q8_0 "
                           "OLLAMA_FLASH_ATTENTION=1 ollama serve")
    assert "ollama pull llama3.1:8b" in cmd.notes[0]


def test_trtllm_yaml_is_written_before_the_command() -> None:
    cmd = launch.build("trtllm", "nvidia/Llama-3.1-8B-Instruct-FP8", max_model_len=4096, max_num_seqs=64,
                       kv_dtype="fp8", checkpoint_quantized=True)
    text = cmd.shell()
    assert text.startswith("cat > cardfit-trtllm.yaml <<'EOF'\nkv_cache_config:\n  dtype: fp8\nEOF\n")
    assert shlex.split(text.splitlines()[-1])[:2] == ["trtllm-serve", "nvidia/Llama-3.1-8B-Instruct-FP8"]


@pytest.mark.parametrize("runtime,kwargs,message", [
    ("tgi", {}, "no launch command for tgi"),
    ("vllm", {"kv_dtype": "q8_0"}, "vllm has no 'q8_0' KV cache"),
    ("ollama", {"kv_dtype": "fp8"}, "ollama has no 'fp8' KV cache"),
    ("vllm", {"tp": 0}, "tp must be a whole number ≥ 1"),
    ("vllm", {"gpu_memory_utilization": 1.5}, "between 0 and 1"),
    ("llama.cpp", {"tp": 2, "attention_dp": 2, "expert_parallel": 2}, "has no expert parallelism"),
    ("vllm", {"tp": 8, "attention_dp": 3, "expert_parallel": 8}, "attention groups that divide them"),
    ("sglang", {"tp": 8, "attention_dp": 2, "expert_parallel": 4}, "experts over all of them"),
    ("trtllm", {"tp": 8, "attention_dp": 4, "expert_parallel": 8}, "over all 8 ranks or none"),
])
def test_refusals(runtime: str, kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        launch.build(runtime, "m", max_model_len=4096, **kwargs)


def test_option_files_name_their_release() -> None:
    for f in OPTIONS.glob("*.toml"):
        data = tomllib.loads(f.read_text())
        assert data["version"] and data["source"].startswith("https://"), f.name
        assert data["flags"] or data.get("env"), f.name


@pytest.mark.parametrize("quant,flag", [("FP8 (E4M3)", ["--quantization", "fp8"]),
                                        ("fp8", ["--quantization", "fp8"]), ("BF16", []),
                                        ("INT4 g128 (AWQ/GPTQ)", [])])
def test_quant_by_id_or_display_name(quant: str, flag: list[str]) -> None:
    args = list(launch.build("vllm", "m", quant=quant, max_model_len=4096).argv)
    assert args[len(args) - len(flag):] == flag if flag else "--quantization" not in args


def test_command_carries_its_notes_as_comments() -> None:
    text = launch.command("vllm", "meta-llama/Llama-3.1-8B-Instruct", quant="INT4 g128 (AWQ/GPTQ)",
                          max_model_len=1300, max_num_seqs=100)
    assert text.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 ")
    assert text.endswith("  # the model named is its 16-bit checkpoint, which need not fit: serve a "
                         "checkpoint quantized as INT4 g128 (AWQ/GPTQ) in its place (vllm reads the format "
                         "from the checkpoint's quantization_config)")


@pytest.mark.parametrize(("runtime", "model", "replicas", "one_node", "flag", "note"), [
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct", 4, True, ["--data-parallel-size", "4"], False),
    ("sglang", "meta-llama/Llama-3.1-8B-Instruct", 3, True, ["--dp-size", "3"], False),
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct", 12, False, [], True),  # replicas beyond one node: servers
    ("llama.cpp", "models/Llama-3.1-8B-Instruct-Q4_K_M.gguf", 3, True, [], True),  # no data parallelism
    ("ollama", "qwen3:8b", 2, True, [], True),
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct", 1, True, [], False),
])
def test_replicas_are_started_or_said_how(runtime, model, replicas, one_node, flag, note):
    """Issue 25.6: '2 replicas' said nothing of starting two servers. Where one node holds every replica an
    engine with data parallelism starts them all; otherwise a note says to run that many servers behind a
    load balancer."""
    cmd = launch.build(runtime, model, max_model_len=8192, replicas=replicas, one_node=one_node)
    argv = list(cmd.argv)
    if flag:
        assert argv[argv.index(flag[0]):argv.index(flag[0]) + 2] == flag and cmd.replicas == replicas
    else:
        assert "--data-parallel-size" not in argv and "--dp-size" not in argv and cmd.replicas == 1
    said = [n for n in cmd.notes if "load balancer" in n]
    assert bool(said) == note
    if note:
        assert said[0].startswith(f"{replicas} replicas: run this command {replicas} times")
