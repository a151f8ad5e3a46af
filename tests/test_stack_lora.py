"""LoRA adapters in SGLang and llama.cpp servers (`cardfit stack`, issue 27 item 3): SGLang's LoRA memory pool
(max_loras_per_batch slots of the stacked qkv_proj / gate_up_proj / o_proj / down_proj buffers its targets
touch, sharded under tensor parallelism) with every adapter in host RAM on each rank, and llama.cpp's --lora
files whole beside the layers they change. Every expected number is worked out by hand from the model's
shapes below; the bundle's flags are checked against the tools' option lists."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cardfit
from cardfit.catalog.models import default_models
from cardfit.runtimes.lora import lora_params
from cardfit.services import stack as stk

OPTIONS = Path(__file__).parent / "data" / "runtime_options"
# the shapes the hand sums use (config.json of each model; the catalog's rows)
LLAMA8 = dict(h=4096, q=4096, kv=1024, f=14336, layers=32)  # Llama 3.1 8B: 32 heads, 8 KV heads × 128
LLAMA70 = dict(h=8192, q=8192, kv=1024, f=28672, layers=80)  # Llama 3.1 70B: 64 heads, 8 KV heads × 128
QWEN32 = dict(h=5120, q=5120, kv=1024, f=27648, layers=64)  # Qwen2.5 32B: 40 heads, 8 KV heads × 128


def _stack(text: str) -> dict:
    return cardfit.stack(text=text)


def _file(gpu: str, base: str, runtime: str, adapter: str, extra: str = "") -> str:
    return (f'[machine]\ngpu = ["{gpu}"]\n{extra}\n[[model]]\nmodel = "{base}"\nruntime = "{runtime}"\n'
            f'context = 8192\nusers = 8\n\n[[model]]\nmodel = "{base}"\nrole = "adapter"\n{adapter}')


def _lora_entries(r: dict) -> list[dict]:
    return [e for d in r["devices"] for e in d["entries"] if e["role"] == "adapter"]


def _server_line(r: dict, tool: str) -> list[str]:
    line = next(ln for ln in r["bundle"]["text"].splitlines() if tool in ln)
    return shlex.split(line.removesuffix(" &"))


# ------------------------------------------------------------------------------------ SGLang


def test_sglang_pool_for_q_and_v_is_the_whole_qkv_stack():
    """The PEFT default for Llama (q_proj, v_proj), rank 16, 4 adapters, 8 users, one H100: SGLang maps both
    to qkv_proj, whose buffers are A (slots, 3 × 16, 4,096) and B (slots, 4,096 + 1,024 + 1,024, 16) in each
    of 32 layers, 16-bit; slots = min(4 adapters, 8 users) + the base model's = 5. Host RAM: each adapter's
    own q and v matrices only (q: 16 × 4,096 + 4,096 × 16; v: 16 × 4,096 + 1,024 × 16)."""
    r = _stack(_file("H100 SXM", "meta-llama/Llama-3.1-8B-Instruct", "sglang",
                     'adapters = 4\nlora_rank = 16\nlora_targets = ["q_proj", "v_proj"]\n'))
    (lora,) = _lora_entries(r)
    per_layer = 3 * 16 * 4096 + (4096 + 1024 + 1024) * 16
    assert lora["bytes"] == 5 * per_layer * 32 * 2 == 94_371_840
    host = (16 * 4096 + 4096 * 16) + (16 * 4096 + 1024 * 16)
    assert lora["host_bytes"] == 4 * host * 32 * 2 == 54_525_952
    words = _server_line(r, "sglang.launch_server")
    assert words[words.index("--max-loras-per-batch") + 1] == "5"
    assert words[words.index("--max-lora-rank") + 1] == "16"
    at = words.index("--lora-target-modules")
    assert words[at + 1:at + 3] == ["q_proj", "v_proj"] and "--enable-lora" in words


def test_sglang_all_linear_rank_64_over_two_h100_shards_as_sglang_does():
    """Llama 3.1 70B, every projection ("all"), rank 64, TP 2, max_loras = 3: qkv_proj keeps A whole
    (3 × 64 × 8,192) and halves B's output ((8,192 + 2 × 1,024) / 2 × 64); o_proj halves A's input
    (64 × 4,096) and keeps B (8,192 × 64); gate_up_proj A 2 × 64 × 8,192, B 2 × 28,672 / 2 × 64; down_proj
    A 64 × 14,336, B 8,192 × 64; 80 layers, 16-bit, on each card. Host: 10 adapters whole on each of the 2
    ranks."""
    r = _stack(_file("2x H100 SXM", "meta-llama/Llama-3.1-70B-Instruct", "sglang",
                     'adapters = 10\nlora_rank = 64\nmax_loras = 3\nlora_targets = ["all"]\n')
               .replace('runtime = "sglang"\n', 'runtime = "sglang"\nquant = "fp8"\ngpus = 2\n', 1))
    a, b = _lora_entries(r)
    per_layer = (3 * 64 * 8192 + (8192 + 2048) // 2 * 64) + (64 * 4096 + 8192 * 64) \
        + (2 * 64 * 8192 + 2 * 28672 // 2 * 64) + (64 * 14336 + 8192 * 64)
    assert a["bytes"] == 3 * per_layer * 80 * 2 == 3_365_928_960
    assert b["bytes"] == 0 or b["bytes"] == a["bytes"]  # the second card's row (tensor parallel: the same)
    whole = 64 * (2 * 8192 + 2 * (8192 + 1024) + 2 * 8192 + 3 * (8192 + 28672))
    assert whole * 80 == lora_params(default_models().get("llama-3.1-70b"), 64, 1)
    assert a["host_bytes"] + b["host_bytes"] == 10 * 2 * whole * 80 * 2
    words = _server_line(r, "sglang.launch_server")
    assert words[words.index("--tp-size") + 1] == "2"
    assert words[words.index("--max-loras-per-batch") + 1] == "3"
    at = words.index("--lora-target-modules")
    assert words[at + 1:at + 8] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                    "down_proj"]


def test_sglang_pool_goes_inside_its_static_fraction():
    """--mem-fraction-static holds weights, KV pool and the LoRA pool: a larger pool raises the fraction."""
    small = _stack(_file("H100 SXM", "meta-llama/Llama-3.1-8B-Instruct", "sglang", "lora_rank = 8\n"))
    large = _stack(_file("H100 SXM", "meta-llama/Llama-3.1-8B-Instruct", "sglang", "lora_rank = 256\n"))

    def frac(r: dict) -> float:
        words = _server_line(r, "sglang.launch_server")
        return float(words[words.index("--mem-fraction-static") + 1])

    assert frac(large) > frac(small)
    assert _lora_entries(large)[0]["bytes"] == 32 * _lora_entries(small)[0]["bytes"]


@given(rank=st.integers(1, 128), tp=st.sampled_from([1, 2, 4, 8]))
def test_lora_params_per_card_shrink_with_tp_and_grow_with_rank(rank, tp):
    m = default_models().get("llama-3.1-70b")
    whole = lora_params(m, rank, 1)
    assert whole / tp <= lora_params(m, rank, tp) <= whole
    assert lora_params(m, rank + 1, tp) > lora_params(m, rank, tp)
    # q, k, v apart sum to the whole attention input side: targets add up
    parts = sum(lora_params(m, rank, tp, (t,)) for t in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                          "up_proj", "down_proj"))
    assert parts == lora_params(m, rank, tp)


# ------------------------------------------------------------------------------------ llama.cpp


def test_llamacpp_adapter_is_its_file_on_one_card():
    """Llama 3.1 8B, one rank-16 adapter over every projection, as convert_lora_to_gguf.py writes it by
    default (f32): per layer q 16 × (4,096 + 4,096), k and v 16 × (4,096 + 1,024), o 16 × (4,096 + 4,096),
    gate, up and down 16 × (4,096 + 14,336); 32 layers × 4 bytes = 167,772,160 (such an adapter's ~168 MB)."""
    r = _stack(_file("RTX 4090", "llama3.1:8b", "llama.cpp", "lora_paths = [\"support.gguf\"]\n"))
    (lora,) = _lora_entries(r)
    per_layer = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 3)
    assert lora["bytes"] == per_layer * 32 * 4 == 167_772_160
    assert lora["host_bytes"] == 0
    words = _server_line(r, "llama-server")
    assert words[words.index("--lora") + 1] == "support.gguf"


def test_llamacpp_adapters_follow_the_layers_over_unequal_cards():
    """Qwen2.5 32B split over an RTX 3090 and an RTX 3060: two rank-8 f16 adapters over every projection
    (per layer 8 × (2 × 5,120 + 2 × 5,120 + 2 × (5,120 + 1,024) + 3 × (5,120 + 27,648)) = 1,048,576 weights)
    go card by card with the layers they change, in the same whole-layer proportion as the model's."""
    r = _stack(_file("RTX 3090", "qwen2.5:32b", "llama.cpp",
                     'lora_rank = 8\nlora_type = "f16"\nlora_paths = ["a.gguf", "b.gguf"]\n')
               .replace('gpu = ["RTX 3090"]', 'gpu = ["RTX 3090", "RTX 3060 12GB"]')
               .replace("context = 8192\nusers = 8", 'quant = "Q4_K_M"\ncontext = 16384\nusers = 2'))
    big, small = _lora_entries(r)
    per_layer = 8 * (2 * 5120 + 2 * 5120 + 2 * (5120 + 1024) + 3 * (5120 + 27648))
    assert per_layer == 1_048_576
    total = 2 * per_layer * 64 * 2
    assert big["bytes"] + small["bytes"] == total
    chat = [e for d in r["devices"] for e in d["entries"] if e["role"] == "chat"]
    layers_big = round(big["bytes"] / (total / 64))
    assert big["bytes"] == layers_big * total // 64  # whole layers
    assert chat[0]["bytes"] > chat[1]["bytes"] and big["bytes"] > small["bytes"]
    words = _server_line(r, "llama-server")
    assert [words[i + 1] for i, w in enumerate(words) if w == "--lora"] == ["a.gguf", "b.gguf"]


def test_llamacpp_scaled_adapters_use_lora_scaled():
    """lora_scale: --lora-scaled FNAME:SCALE (the format of llama-server's README at the option list's
    commit); the bytes are the same files'."""
    plain = _stack(_file("RTX 4090", "llama3.1:8b", "llama.cpp", 'lora_paths = ["a.gguf", "b.gguf"]\n'))
    scaled = _stack(_file("RTX 4090", "llama3.1:8b", "llama.cpp",
                          'lora_paths = ["a.gguf", "b.gguf"]\nlora_scale = 0.5\n'))
    assert _lora_entries(plain)[0]["bytes"] == _lora_entries(scaled)[0]["bytes"]
    words = _server_line(scaled, "llama-server")
    assert [words[i + 1] for i, w in enumerate(words) if w == "--lora-scaled"] == ["a.gguf:0.5", "b.gguf:0.5"]
    assert "--lora" not in words


def test_llamacpp_without_paths_names_placeholders():
    r = _stack(_file("RTX 4090", "llama3.1:8b", "llama.cpp", "adapters = 2\nlora_type = \"bf16\"\n"))
    words = _server_line(r, "llama-server")
    loras = [words[i + 1] for i, w in enumerate(words) if w == "--lora"]
    assert loras == ["adapter-1.gguf", "adapter-2.gguf"]
    assert any("adapter-N.gguf stand for your adapter files" in n for n in r["notes"])


# ------------------------------------------------------------------------------------ flags and errors


TOOLS = {"sglang": "sglang", "llama.cpp": "llama-server", "vllm": "vllm"}
FRONTEND = {"vllm": ("--port",)}  # tests/test_stack.py: vllm serve's own frontend flag


@pytest.mark.parametrize("runtime,base,adapter", [
    ("sglang", "meta-llama/Llama-3.1-8B-Instruct", 'lora_targets = ["qkv_proj", "o_proj"]\n'
                                                   'lora_paths = ["a=/lora/a", "b=/lora/b"]\n'),
    ("sglang", "meta-llama/Llama-3.1-8B-Instruct", "adapters = 3\n"),
    ("llama.cpp", "llama3.1:8b", "adapters = 2\n"),
    ("llama.cpp", "llama3.1:8b", "adapters = 2\nlora_scale = 0.75\n"),
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct", "adapters = 20\n"),
])
def test_every_lora_flag_is_an_option_of_the_tool(runtime, base, adapter):
    spec = stk.read_spec(stk.StackInput(text=_file("H100 SXM", base, runtime, adapter)))
    machine, _ = stk.solve(spec, ())
    ports = stk.assign_ports(machine)
    (p,) = machine.placed
    known = tomllib.loads((OPTIONS / f"{TOOLS[runtime]}.toml").read_text())
    flags = stk.server_launch(p, ports[p.server.entry.index]).flags()
    assert {"--enable-lora", "--lora", "--lora-scaled"} & set(flags)
    for flag in flags:
        assert flag in (*known["flags"], *FRONTEND.get(runtime, ())), f"{flag}: not in {known['tool']}"


BAD = [
    ("ollama adapter", "ollama", "qwen3:8b", "", "inside a vLLM, SGLang or llama.cpp server"),
    ("targets on vllm", "vllm", "meta-llama/Llama-3.1-8B-Instruct", 'lora_targets = ["q_proj"]\n',
     "lora_targets, lora_paths, lora_type and lora_scale are SGLang's and"),
    ("file type on sglang", "sglang", "meta-llama/Llama-3.1-8B-Instruct", 'lora_type = "f16"\n',
     "lora_type and lora_scale are llama.cpp's"),
    ("slots on llama.cpp", "llama.cpp", "llama3.1:8b", "max_loras = 2\n",
     "llama-server loads every --lora adapter at start"),
    ("unknown target", "sglang", "meta-llama/Llama-3.1-8B-Instruct", 'lora_targets = ["lm_head"]\n',
     "lora_targets: unknown module 'lm_head'"),
    ("targets not a list", "sglang", "meta-llama/Llama-3.1-8B-Instruct", "lora_targets = 3\n",
     "lora_targets must be a list of module names"),
    ("paths and count disagree", "llama.cpp", "llama3.1:8b", 'adapters = 3\nlora_paths = ["a.gguf"]\n',
     "adapters = 3 but lora_paths names 1"),
    ("bad file type", "llama.cpp", "llama3.1:8b", 'lora_type = "q4_0"\n',
     "lora_type must be one of f32, f16, bf16"),
    ("path with a newline", "llama.cpp", "llama3.1:8b", 'lora_paths = ["a\\nb"]\n',
     "lora_paths must be a one-line"),
    ("path with a comma", "llama.cpp", "llama3.1:8b", 'lora_paths = ["a,b.gguf"]\n',
     "llama-server splits --lora on ','"),
    ("scaled path with a colon", "llama.cpp", "llama3.1:8b", 'lora_paths = ["C:/a.gguf"]\nlora_scale = 2\n',
     "cannot be passed; rename the file"),
    ("scale on sglang", "sglang", "meta-llama/Llama-3.1-8B-Instruct", "lora_scale = 0.5\n",
     "lora_type and lora_scale are llama.cpp's"),
    ("infinite scale", "llama.cpp", "llama3.1:8b", "lora_scale = inf\n",
     "lora_scale must be a finite number"),
]


@pytest.mark.parametrize("why,runtime,base,adapter,message", BAD, ids=[b[0] for b in BAD])
def test_bad_lora_entries_get_one_line(tmp_path, run_cli, why, runtime, base, adapter, message):
    f = tmp_path / "s.toml"
    f.write_text(_file("RTX 4090", base, runtime, adapter))
    code, out, err = run_cli("stack", str(f))
    assert code == 2, (why, out, err)
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err, err
