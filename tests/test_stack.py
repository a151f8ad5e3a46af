"""`cardfit stack FILE` (issue 27): every card's bytes are the single-model plans' plus what a shared machine
adds (a CUDA context per server, vLLM's share rounded up to a hundredth, a draft's weights and cache, LoRA
slots), the bundle's flags are the runtimes' own, and bad input is one line."""

from __future__ import annotations

import json
import math
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.training import lora_params
from cardfit.core.weights import tensor_bytes
from cardfit.runtimes import llamacpp_like as llama
from cardfit.services import stack as stk

from .conftest import ROOT

EXAMPLES = ROOT / "examples" / "stacks"
OPTIONS = Path(__file__).parent / "data" / "runtime_options"
TOOL_FILE = {"vllm": "vllm", "sglang": "sglang", "llama.cpp": "llama-server", "ollama": "ollama"}
# `vllm serve`'s own server flags are not engine arguments, so the generated option list (from
# vllm/engine/arg_utils.py) lacks them: vllm/entrypoints/openai/cli_args.py FrontendArgs has
# `port: int = 8000`
FRONTEND = {"vllm": ("--port",)}


def _plan(model: str, gpu: str, **kw) -> dict:
    return cardfit.plan(model, gpu=gpu, **kw)


def _stack(name: str, **kw) -> dict:
    return cardfit.stack(str(EXAMPLES / name), **kw)


def _vllm_bytes(need_per_card: int, gpu_usable: int, riders: int = 0) -> tuple[int, float]:
    """What a vLLM server holds on a shared card: its --gpu-memory-utilization share of CUDA's total (the
    card less the driver's reserve), rounded up to a hundredth, plus its CUDA context outside the share."""
    rt = default_runtimes().get("vllm")
    total = gpu_usable - rt.cuda_total_shortfall_bytes
    util = math.ceil((need_per_card + riders) * 100 / total) / 100
    return int(total * util) - riders + rt.context_bytes, util


# ------------------------------------------------------------------------------------ the four examples


def test_rag_on_one_4090_is_three_vllm_shares_that_sum_under_one():
    r = _stack("rag-4090.toml")
    (card,) = r["devices"]
    assert [e["model"] for e in card["entries"]] == ["meta-llama/Llama-3.1-8B-Instruct", "bge-m3",
                                                      "bge-reranker-v2-m3"]
    utils = []
    for e, (model, quant, context, users) in zip(card["entries"], [
            ("meta-llama/Llama-3.1-8B-Instruct", "fp8", 4096, 4), ("bge-m3", None, 8192, 4),
            ("bge-reranker-v2-m3", None, 2048, 4)], strict=True):
        p = _plan(model, "RTX 4090", runtime="vllm", quant=quant, context=context, batch=users)
        need = p["gpus"][0]["need_bytes"]
        expected, util = _vllm_bytes(need, card["usable_bytes"])
        assert e["bytes"] == expected, model
        utils.append(util)
    assert sum(utils) <= 1
    reserve = default_runtimes().get("vllm").cuda_total_shortfall_bytes
    assert card["free_bytes"] == card["usable_bytes"] - reserve - sum(e["bytes"] for e in card["entries"])
    assert r["verdict"] == card["verdict"] == "tight"  # under 5 GB left on one card
    lines = r["bundle"]["text"].splitlines()
    servers = [ln for ln in lines if " vllm serve " in ln]
    assert len(servers) == 3
    ports = [shlex.split(ln)[shlex.split(ln).index("--port") + 1] for ln in servers]
    assert len(set(ports)) == 3
    for ln, util in zip(servers, utils, strict=True):
        words = shlex.split(ln)
        assert words[words.index("--gpu-memory-utilization") + 1] == f"{util:g}"
    assert "--runner" in servers[1] and "--runner" in servers[2] and "--runner" not in servers[0]
    for ln, port in zip(servers, ports, strict=True):  # each waits for the one before to answer
        assert lines[lines.index(ln) + 1] == f"until curl -sf http://127.0.0.1:{port}/health >/dev/null; " \
            "do sleep 2; done"


def test_70b_with_draft_and_20_adapters_on_two_h100():
    r = _stack("70b-draft-lora-2xh100.toml")
    assert r["verdict"] == "fits"
    assert len(r["devices"]) == 2
    a, b = r["devices"]
    assert [e["bytes"] for e in a["entries"]] == [e["bytes"] for e in b["entries"]]  # tensor parallel
    chat, draft, lora = a["entries"]
    assert (chat["role"], draft["role"], lora["role"]) == ("chat", "draft", "adapter")
    # the draft: Llama 3.2 1B's weights and its own KV cache for the 70B's 16 sequences of 8,192 tokens, half
    # on each card
    d = _plan("meta-llama/Llama-3.2-1B-Instruct", "H100 SXM", runtime="vllm", context=8192, batch=16,
              gpus=2, tp=2)["memory"]
    assert draft["bytes"] == -(-(d["weights_bytes"] + d["kv_cache_bytes"]) // 2)
    # LoRA, by hand: min(20 adapters, 16 users) slots of rank 16 over Llama 3.1 70B's 80 layers (hidden 8,192,
    # 8 KV heads × 128, MLP 28,672), TP 2: column-parallel q, k, v, gate, up keep A whole and halve B;
    # row-parallel o, down halve A and keep B whole
    r16, h, kv, f = 16, 8192, 1024, 28672
    per_layer = (r16 * h + r16 * h // 2) + 2 * (r16 * h + r16 * kv // 2) + (r16 * h // 2 + r16 * h) \
        + 2 * (r16 * h + r16 * f // 2) + (r16 * f // 2 + r16 * h)
    assert lora["bytes"] == 16 * per_layer * 80 * 2 == 4_487_905_280
    # host RAM: all 20 adapters, whole (--max-cpu-loras)
    m = default_models().get("llama-3.1-70b")
    assert lora["host_bytes"] == 20 * lora_params(m, 16, "all") * 2
    p = _plan("meta-llama/Llama-3.1-70B-Instruct", "H100 SXM", runtime="vllm", quant="fp8", context=8192,
              batch=16, gpus=2, tp=2)
    need = -(-p["gpus"][0]["need_bytes"] // 2)
    expected, util = _vllm_bytes(need, a["usable_bytes"], draft["bytes"] + lora["bytes"])
    assert chat["bytes"] == expected
    line = next(ln for ln in r["bundle"]["text"].splitlines() if " vllm serve " in ln)
    words = shlex.split(line)
    assert words[0] == "CUDA_VISIBLE_DEVICES=0,1"
    assert words[words.index("--tensor-parallel-size") + 1] == "2"
    assert words[words.index("--max-loras") + 1] == "16" and words[words.index("--max-cpu-loras") + 1] == "20"
    assert words[words.index("--gpu-memory-utilization") + 1] == f"{util:g}"
    assert '"model":"meta-llama/Llama-3.2-1B-Instruct"' in words[words.index("--speculative-config") + 1]


def test_vision_and_chat_on_a_64gb_mac_are_two_ollama_models():
    r = _stack("vision-chat-mac.toml")
    (card,) = r["devices"]
    assert card["gpu"] == "Apple M1 Max 64GB" and r["verdict"] == "fits"
    asked = [("gemma3:12b", 8192), ("qwen3:14b", 16384)]
    for e, (model, context) in zip(card["entries"], asked, strict=True):
        p = _plan(model, "M1 Max 64GB", runtime="ollama", context=context, batch=1)
        assert e["bytes"] == p["memory"]["total_bytes"], model  # Metal: no CUDA context to add
        assert e["port"] == 11434
    assert card["free_bytes"] == card["usable_bytes"] - sum(e["bytes"] for e in card["entries"])
    text = r["bundle"]["text"]
    assert text.count("ollama serve") == 1 and "OLLAMA_MAX_LOADED_MODELS=2" in text
    assert "CUDA_VISIBLE_DEVICES" not in text


def test_llamacpp_splits_by_free_memory_over_a_3090_and_a_3060():
    r = _stack("llamacpp-3090-3060.toml")
    big, small = r["devices"]
    (e0,), (e1,) = big["entries"], small["entries"]
    p = _plan("qwen2.5:32b", "RTX 3090", runtime="llama.cpp", quant="Q4_K_M", context=16384, batch=2, gpus=2)
    mem = p["memory"]
    # pipeline parallelism: 3 more copies of the KQ mask on each card, 2 x 16384 cells (2 slots, padded to
    # 256) x a 512-token micro-batch, f16 with flash attention (llama.cpp's default)
    copies = 3 * 512 * 32768 * 2
    fixed = mem["overhead_bytes"] + mem["activation_bytes"] + copies
    # every card pays its own context, compute buffer and mask copies, as `cardfit plan --gpus 2` counts
    # them; the split is in proportion to the free memory llama.cpp sees when it loads (each card's usable
    # bytes less that card's fixed bytes)
    assert e0["bytes"] + e1["bytes"] == p["gpus"][0]["need_bytes"]
    layered = mem["weights_bytes"] + mem["kv_cache_bytes"]
    m = default_models().get("qwen2.5:32b")
    frees = [big["usable_bytes"] - fixed, small["usable_bytes"] - fixed]
    line = next(ln for ln in r["bundle"]["text"].splitlines() if "llama-server" in ln)
    words = shlex.split(line)
    split = [float(x) for x in words[words.index("--tensor-split") + 1].split(",")]
    assert split == [round(f / sum(frees), 3) for f in frees]
    # llama.cpp puts slot il of the 64 layers + the output layer on the first card whose cumulative split
    # exceeds il / 65 (src/llama-model.cpp); the output matrix (untied, Q6_K in Q4_K_M) goes with slot 64,
    # on the 3060
    first = sum(1 for il in range(m.layers + 1) if il / (m.layers + 1) < split[0] / sum(split))
    output = sum(b for k, _, b in tensor_bytes(m, default_quants().find("Q4_K_M"))
                 if k in ("output", "output_norm"))
    assert e0["bytes"] - fixed == round(first * (layered - output) / m.layers)
    assert r["verdict"] in ("fits", "tight")
    assert e0["tokens_per_s"] == e1["tokens_per_s"]  # one server
    # the 3060 reads its third of the layers at 360 GB/s: slower than the same split on two 3090s
    assert e0["tokens_per_s"] < _plan("qwen2.5:32b", "RTX 3090", runtime="llama.cpp", quant="Q4_K_M",
                                      context=16384, batch=2, gpus=2)["gpus"][0]["decode_tokens_per_s"] * 2


# ------------------------------------------------------------------------------------ the interface


def test_json_keys_are_the_issues(run_json):
    r = run_json("stack", str(EXAMPLES / "rag-4090.toml"))
    assert {"verdict", "devices", "changes", "bundle"} <= set(r)
    assert r["verdict"] in ("fits", "tight", "no")
    d = r["devices"][0]
    assert {"gpu", "usable_bytes", "free_bytes", "verdict", "entries"} <= set(d)
    assert {"model", "role", "runtime", "bytes", "tokens_per_s"} <= set(d["entries"][0])
    assert set(r["bundle"]) == {"format", "text"} and r["bundle"]["format"] == "script"
    assert all(isinstance(e["bytes"], int) for e in d["entries"])


@pytest.mark.parametrize("name,servers", [("rag-4090.toml", 3), ("70b-draft-lora-2xh100.toml", 1),
                                          ("llamacpp-3090-3060.toml", 1)])
def test_compose_bundle_has_a_service_per_server(run_json, name, servers):
    import yaml

    r = run_json("stack", str(EXAMPLES / name), "--bundle", "compose")
    assert r["bundle"]["format"] == "compose"
    services = yaml.safe_load(r["bundle"]["text"])["services"]
    assert len(services) == servers
    hosts = [s["ports"][0].split(":")[0] for s in services.values()]
    assert len(set(hosts)) == servers
    cards = {d["gpu"] for d in r["devices"] for _ in d["entries"]}
    names = list(services)
    for before, after in zip(names, names[1:], strict=False):  # one server at a time (STARTUP_SOURCE)
        assert services[after]["depends_on"] == {before: {"condition": "service_healthy"}}
    for s in services.values():
        assert s["healthcheck"]["test"][0] == "CMD"
        ids = s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
        assert ids and len(ids) <= len(r["devices"]) and cards
        words = s.get("entrypoint") or s.get("command")
        assert "--port" in words and words[words.index("--port") + 1] == s["ports"][0].split(":")[1]


def test_compose_is_for_cuda_cards(run_cli):
    code, _, err = run_cli("stack", str(EXAMPLES / "vision-chat-mac.toml"), "--bundle", "compose")
    assert code == 2 and "--bundle compose writes NVIDIA (CUDA) services" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", sorted(p.name for p in [*EXAMPLES.glob("*.toml"), *EXAMPLES.glob("*.yaml")]))
def test_every_bundle_flag_exists_in_the_tool(name):
    spec = stk.read_spec(stk.StackInput(file=str(EXAMPLES / name)))
    machine, _ = stk.solve(spec, ())
    ports = stk.assign_ports(machine)
    assert machine.placed
    for p in machine.placed:
        rt = p.sized.ctx.runtime.id
        known = tomllib.loads((OPTIONS / f"{TOOL_FILE[rt]}.toml").read_text())
        launch = stk.server_launch(p, ports[p.server.entry.index])
        for flag in launch.flags():
            allowed = (*known["flags"], *FRONTEND.get(rt, ()))
            assert flag in allowed, f"{flag} is not an option of {known['tool']}"
        for var, _ in launch.env:
            assert var in known.get("env", []), f"{var} is not read by {known['tool']}"
    assert len(set(ports.values())) == len({p.server.entry.index for p in machine.placed
                                            if p.sized.ctx.runtime.id != "ollama"}) + \
        (1 if any(p.sized.ctx.runtime.id == "ollama" for p in machine.placed) else 0)


# stacks beyond the README's four, each reaching flags and values they do not: (name, stack file, why)
MORE_BUNDLES = [
    ("sglang-lora-llamacpp-lora-ollama-q8", """[machine]
gpu = ["H100 SXM", "RTX 4090"]
[[model]]
model = "meta-llama/Llama-3.1-8B-Instruct"
runtime = "sglang"
kv_dtype = "fp8"
context = 8192
users = 8
[[model]]
model = "meta-llama/Llama-3.1-8B-Instruct"
role = "adapter"
adapters = 4
lora_rank = 32
[[model]]
model = "qwen3:8b"
runtime = "llama.cpp"
quant = "Q4_K_M"
kv_dtype = "q8_0"
context = 8192
users = 2
flash_attn = true
[[model]]
model = "qwen3:8b"
role = "adapter"
adapters = 2
lora_paths = ["a.gguf", "b.gguf"]
lora_scale = 0.5
[[model]]
model = "gemma3:4b"
runtime = "ollama"
kv_dtype = "q8_0"
context = 8192
""", "SGLang's LoRA pool and FP8 KV (fp8_e4m3), llama.cpp's q8_0 cache with -fa and --lora-scaled, Ollama's "
     "OLLAMA_KV_CACHE_TYPE"),
    ("vllm-fp8-kv-rerank-llamacpp", """[machine]
gpu = ["2x L40S"]
[[model]]
model = "Qwen/Qwen3-30B-A3B"
runtime = "vllm"
quant = "fp8"
kv_dtype = "fp8"
context = 16384
users = 8
[[model]]
model = "bge-reranker-v2-m3"
role = "rerank"
runtime = "llama.cpp"
context = 2048
requests_per_s = 4
""", "vLLM's --kv-cache-dtype and --quantization values, a reranker on llama-server"),
]


def _server_lines(text: str) -> list[list[str]]:
    """The bundle script's lines that start a server, split as the shell splits them."""
    starts = (" vllm serve ", " sglang.launch_server ", " llama-server ", " ollama serve ")
    return [shlex.split(ln) for ln in text.splitlines() if any(w in f" {ln} " for w in starts)]


# the word after which a tool's own arguments start, and its option list
TOOLS = {("vllm", "serve"): "vllm", ("-m", "sglang.launch_server"): "sglang",
         ("llama-server",): "llama-server", ("ollama", "serve"): "ollama"}


def _tool(words: list[str]) -> tuple[str, list[str]]:
    """The tool a server line starts and the words it reads (its arguments)."""
    for key, tool in TOOLS.items():
        for i in range(len(words) - len(key) + 1):
            if tuple(words[i:i + len(key)]) == key:
                return tool, words[i + len(key):]
    raise AssertionError(f"no known server in {' '.join(words)}")


def _check_words(words: list[str], where: str) -> int:
    """Every environment variable, flag and choice-valued flag's value of one server line against the tool's
    own option list (tests/data/runtime_options/, as tests/test_launch.py checks deploy's commands)."""
    tool, args = _tool(words)
    known = tomllib.loads((OPTIONS / f"{tool}.toml").read_text())
    frontend = FRONTEND.get("vllm", ()) if tool == "vllm" else ()
    env = [w.split("=", 1) for w in words[:len(words) - len(args)] if re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w)]
    words = args
    for name, value in env:
        if name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):  # the CUDA driver's, not the tool's
            continue
        assert name in known.get("env", []), f"{where}: {name} is not read by {known['tool']}"
        if name in known.get("choices", {}):
            assert value in known["choices"][name], f"{where}: {name}={value}"
    flags = [w for w in words if re.fullmatch(r"--?[A-Za-z][A-Za-z0-9-]*", w)]
    for flag in flags:
        assert flag in (*known["flags"], *frontend), f"{where}: {flag} is not an option of {known['tool']}"
    for flag, allowed in known.get("choices", {}).items():
        if flag in words:
            assert words[words.index(flag) + 1] in allowed, f"{where}: {flag} {words[words.index(flag) + 1]}"
    return len(flags) + len(env)


BUNDLE_CASES = [(p.name, p.read_text(), "a README stack") for p in sorted(EXAMPLES.glob("*.toml"))] + \
    [(n, t, why) for n, t, why in MORE_BUNDLES]


@pytest.mark.parametrize("name,text,why", BUNDLE_CASES, ids=[c[0] for c in BUNDLE_CASES])
def test_every_flag_and_value_in_the_bundle_text_is_the_tools_own(name, text, why):
    """What the user copies: the script's server lines and the compose services' commands, word by word (the
    flags, the environment and the values of flags with a fixed set of choices), not the launch objects."""
    import yaml

    r = cardfit.stack(text=text)
    assert r["verdict"] in ("fits", "tight") and not r["unplaced"], (name, r["unplaced"])
    lines = _server_lines(r["bundle"]["text"])
    assert len(lines) == len({e["port"] for d in r["devices"] for e in d["entries"] if e.get("port")}), name
    assert sum(_check_words(words, f"{name} script") for words in lines) > 0
    if any(d["gpu"].startswith("Apple") for d in r["devices"]):
        return  # --bundle compose is for CUDA cards (test_compose_is_for_cuda_cards)
    services = yaml.safe_load(cardfit.stack(text=text, bundle="compose")["bundle"]["text"])["services"]
    for svc_name, svc in services.items():
        # a `command` runs after the image's entrypoint (runtimes.toml image_entrypoint: llama-server, ollama)
        entry = ["llama-server"] if "-llama-cpp" in svc_name else ["ollama"] if "-ollama" in svc_name else []
        words = [*(f"{k}={v}" for k, v in (svc.get("environment") or {}).items()),
                 *entry, *(svc.get("entrypoint") or svc.get("command"))]
        assert _check_words(words, f"{name} compose {svc_name}") > 0


def test_text_instead_of_a_file_and_the_web_api():
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    text = (EXAMPLES / "vision-chat-mac.toml").read_text()
    assert cardfit.stack(text=text) == _stack("vision-chat-mac.toml")
    client = TestClient(create_app())
    ok = client.post("/api/stack", json={"text": text})
    assert ok.status_code == 200 and ok.json()["verdict"] == "fits"
    refused = client.post("/api/stack", json={"file": str(EXAMPLES / "vision-chat-mac.toml")})
    assert refused.status_code == 400 and "reads no files" in refused.text


# ------------------------------------------------------------------------------------ placement


def _ollama_stack(cards: list[str], models: list[tuple[str, str]]) -> str:
    return f"[machine]\ngpu = {json.dumps(cards)}\n" + "".join(
        f'[[model]]\nmodel = "{m}"\nrole = "{role}"\nruntime = "ollama"\ncontext = 8192\n'
        for m, role in models)


# (cards, Ollama models in file order, the card each lands on, why the case is tricky)
OLLAMA_CARDS = [
    (["RTX 4090", "RTX 3060 12GB"], [("qwen2.5:32b", "chat"), ("bge-m3", "embed")], [0, 1],
     "the embedder fits beside the 32B on the 4090, but the 3060 has more left: Ollama puts it there"),
    (["2x RTX 3090"], [("llama3.1:8b", "chat"), ("qwen3:8b", "chat")], [0, 1],
     "two equal cards: the second model goes to the empty one, not beside the first"),
    (["RTX 3060 12GB", "RTX 4090"], [("llama3.1:8b", "chat")], [1],
     "the larger card is not card 0: Ollama sorts by free memory, not by index"),
    (["RTX 4090", "RTX 3060 12GB"], [("llama3.1:8b", "chat"), ("qwen3:8b", "chat"), ("gemma3:4b", "chat")],
     [0, 0, 1], "8B on the 4090 still leaves it more than the whole 3060; then the 3060 has the most"),
]


@pytest.mark.parametrize("cards,models,where,why", OLLAMA_CARDS, ids=[c[3][:40] for c in OLLAMA_CARDS])
def test_ollama_loads_each_model_on_the_card_with_the_most_memory_left(cards, models, where, why):
    """Ollama's scheduler, not the bundle, picks an Ollama model's card: of the cards that hold it whole, the
    one with the most free memory when it loads (server/sched.go pickBestFullFitByLibrary), models in file
    order; each model's bytes there are its bytes alone on that card."""
    r = cardfit.stack(text=_ollama_stack(cards, models))
    assert r["verdict"] != "no", why
    got = {e["model"]: i for i, d in enumerate(r["devices"]) for e in d["entries"]}
    assert [got[m] for m, _ in models] == where, why
    for (m, role), d in zip(models, where, strict=True):
        alone = cardfit.stack(text=_ollama_stack([r["devices"][d]["gpu"]], [(m, role)]))
        (entry,) = alone["devices"][0]["entries"]
        mine = next(e for e in r["devices"][d]["entries"] if e["model"] == m)
        assert mine["bytes"] == entry["bytes"], (m, why)
    line = next(ln for ln in r["bundle"]["text"].splitlines() if " ollama serve " in ln)
    assert f"CUDA_VISIBLE_DEVICES={','.join(str(d) for d in sorted(set(where)))} " in line


def test_the_bundle_starts_ollama_after_the_servers_placed_before_it():
    """Ollama places its models against what is loaded when it loads them, so the bundle starts it after the
    other servers, as the plan placed them, whatever the file's order."""
    text = ('[machine]\ngpu = ["2x RTX 4090"]\n[[model]]\nmodel = "gemma3:4b"\nruntime = "ollama"\n'
            'context = 8192\n[[model]]\nmodel = "meta-llama/Llama-3.1-8B-Instruct"\nruntime = "vllm"\n'
            'quant = "fp8"\ncontext = 8192\nusers = 4\n')
    import yaml

    script = cardfit.stack(text=text)["bundle"]["text"]
    assert script.index(" vllm serve ") < script.index(" ollama serve ")
    compose = yaml.safe_load(cardfit.stack(text=text, bundle="compose")["bundle"]["text"])["services"]
    assert [n.rsplit("-", 1)[-1] for n in compose] == ["vllm", "ollama"]
    r = cardfit.stack(text=text)
    cards = {e["model"]: i for i, d in enumerate(r["devices"]) for e in d["entries"]}
    assert cards == {"meta-llama/Llama-3.1-8B-Instruct": 0, "gemma3:4b": 1}  # the card vLLM leaves emptier


def test_an_ollama_split_is_every_models_and_the_bundle_asks_ollama_for_it():
    """gpus = N on Ollama entries (every one, N the machine's cards) splits each model over the cards, which
    Ollama does only with OLLAMA_SCHED_SPREAD=1: the bundle sets it, and without gpus it is unset."""
    two = ('[machine]\ngpu = ["2x RTX 3090"]\n[[model]]\nmodel = "llama3.1:8b"\ncontext = 8192\n{g}'
           '[[model]]\nmodel = "qwen3:8b"\ncontext = 8192\n{g}')
    split = cardfit.stack(text=two.format(g="gpus = 2\n"))
    assert [len(d["entries"]) for d in split["devices"]] == [2, 2]
    line = next(ln for ln in split["bundle"]["text"].splitlines() if " ollama serve " in ln)
    assert "OLLAMA_SCHED_SPREAD=1 " in line and _check_words(shlex.split(line), "spread") > 0
    alone = cardfit.stack(text=two.format(g=""))
    assert [len(d["entries"]) for d in alone["devices"]] == [1, 1]
    assert "OLLAMA_SCHED_SPREAD" not in alone["bundle"]["text"]


def test_one_stated_ollama_port_is_the_servers_whichever_entry_states_it():
    """The Ollama entries share one `ollama serve`: a port stated on the second entry is its port too (before,
    the first entry's default, 11434, won and the stated 11500 vanished)."""
    r = cardfit.stack(text='[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "llama3.1:8b"\ncontext = 8192\n'
                           '[[model]]\nmodel = "qwen3:8b"\nport = 11500\ncontext = 8192\n')
    assert {e["port"] for e in r["devices"][0]["entries"]} == {11500}
    assert "OLLAMA_HOST=127.0.0.1:11500 " in r["bundle"]["text"] and "11434" not in r["bundle"]["text"]


def test_a_set_no_single_change_helps_says_so():
    """A 405B on one RTX 4090: no context, quantization or up to 4 more 4090s places it, so `changes` is
    empty; the notes say what was tried and point at --rent, which finds a machine that holds it."""
    text = '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "llama3.1:405b"\ncontext = 8192\n'
    r = cardfit.stack(text=text)
    assert r["verdict"] == "no" and r["changes"] == [] and len(r["unplaced"]) == 1
    assert any(n.startswith("no single change places more of the set") and "--rent" in n for n in r["notes"])
    rented = cardfit.stack(text=text, rent=True)
    assert rented["cheapest"] is not None and rented["cheapest"]["count"] > 1
    assert not any("--rent" in n for n in rented["notes"])


@pytest.mark.parametrize("cards,model,extra,reason", [
    (["M1 Max 64GB"], "meta-llama/Llama-3.1-8B-Instruct", 'runtime = "vllm"\n',
     "vLLM has no Apple Metal support"),
    (["RTX 3090"], "meta-llama/Llama-3.1-8B-Instruct", 'runtime = "vllm"\nquant = "fp8"\n',
     "RTX 3090 has no FP8 support"),
])
def test_a_model_no_card_can_run_says_why(cards, model, extra, reason):
    """Not "no room" where memory is not the reason: the runtime lacks the cards' software stack, or the
    cards lack the quantization's format (core/fit.py unsupported)."""
    text = f'[machine]\ngpu = {json.dumps(cards)}\n[[model]]\nmodel = "{model}"\n{extra}context = 8192\n'
    (u,) = cardfit.stack(text=text)["unplaced"]
    assert u["reason"] == reason


# ------------------------------------------------------------------------------------ changes


def test_a_set_that_does_not_fit_gets_changes_that_each_make_it_fit(tmp_path):
    f = tmp_path / "big.toml"
    f.write_text('[machine]\ngpu = ["RTX 4090"]\n'
                 '[[model]]\nmodel = "qwen3:14b"\nruntime = "ollama"\ncontext = 32768\n'
                 '[[model]]\nmodel = "gemma3:12b"\nrole = "vision"\nruntime = "ollama"\ncontext = 32768\n')
    r = cardfit.stack(str(f))
    assert r["verdict"] == "no" and r["unplaced"][0]["model"] == "gemma3:12b"
    fitting = [c for c in r["changes"] if c["fits"]]
    kinds = [c["kind"] for c in fitting]
    assert kinds == sorted(kinds, key=lambda k: stk.CHANGE_ORDER[k])  # settings before a card
    assert kinds[-3:] == ["card", "drop", "drop"] and fitting[-3]["monthly_usd"] > 0
    assert r["changes"][:len(fitting)] == fitting  # what makes it fit before what only helps
    spec = stk.read_spec(stk.StackInput(file=str(f)))
    for c in fitting:
        if c["kind"] == "card":
            changed = spec.__class__(spec.gpus * 2, spec.ram_gb, spec.entries)
        else:
            e = next(x for x in spec.entries if x.model == c["model"])
            if c["kind"] == "context":
                changed = stk._with(spec, e, context=int(c["change"].split("→")[1].replace(",", "")))
            elif c["kind"] == "quant":
                changed = stk._with(spec, e, quant=c["change"].split("→")[1].strip())
            elif c["kind"] == "drop":
                changed = spec.__class__(spec.gpus, spec.ram_gb, tuple(x for x in spec.entries if x is not e))
            else:
                changed = stk._with(spec, e, resident=False)
        machine, _ = stk.solve(changed, ())
        assert not machine.unplaced, c


def test_an_ollama_model_that_may_be_swapped_shares_one_slot(tmp_path):
    f = tmp_path / "swap.toml"
    f.write_text('[machine]\ngpu = ["RTX 4090"]\n'
                 '[[model]]\nmodel = "qwen3:8b"\nruntime = "ollama"\ncontext = 8192\n'
                 '[[model]]\nmodel = "gemma3:12b"\nrole = "vision"\nruntime = "ollama"\ncontext = 8192\n'
                 'resident = false\n'
                 '[[model]]\nmodel = "qwen3:14b"\nruntime = "ollama"\ncontext = 8192\nresident = false\n')
    r = cardfit.stack(str(f))
    (card,) = r["devices"]
    by = {e["model"]: e for e in card["entries"]}
    swapped = max(by["gemma3:12b"]["bytes"], by["qwen3:14b"]["bytes"])
    assert card["free_bytes"] == card["usable_bytes"] - by["qwen3:8b"]["bytes"] - swapped
    assert not by["qwen3:14b"]["resident"] and by["qwen3:8b"]["resident"]
    assert "OLLAMA_MAX_LOADED_MODELS=2" in r["bundle"]["text"]


# ------------------------------------------------------------------------------------ arithmetic


@given(layered=st.integers(0, 10**12), layers=st.integers(1, 200),
       frees=st.lists(st.integers(1, 10**11), min_size=2, max_size=8), out_share=st.floats(0, 0.5))
def test_layer_split_keeps_every_byte_and_follows_free_memory(layered, layers, frees, out_share):
    output = int(layered * out_share)
    out = llama.layer_split(layered, layers, frees, output)
    assert sum(out) == layered and len(out) == len(frees)
    cards = llama.layer_cards(layers, frees)
    assert cards == sorted(cards)  # consecutive layers on each card, in card order
    assert out[cards[-1]] >= output  # the output layer sits on the card of the last slot
    per_layer = (layered - output) / layers
    for d, (b, f) in enumerate(zip(out, frees, strict=True)):
        assert b >= 0
        repeating = b - (output if d == cards[-1] else 0)
        # layers + 1 slots: a card is within two layers of its proportion of the repeating layers
        assert abs(repeating - (layered - output) * f / sum(frees)) <= 2 * per_layer + 1


# Real split loads: the KV buffer each card of a llama.cpp layer split printed, the KV bytes per layer known,
# so the layers on each card are read off the log. Both are llama.cpp's default split over equal cards (equal
# free memory): with n_layer + 1 slots the first card holds one layer more than half, which an even split of
# n_layer layers does not give.
KV_SPLITS = [
    # Nixiesearch GPU guide (memory_stack.toml): Qwen2-0.5B, 24 layers, 2x RTX 4090, n_ctx 32768:
    # 16 MiB of f16 KV a layer; CUDA0 208 MiB, CUDA1 176 MiB
    ("nixiesearch/nixiesearch docs/docs/deployment/gpu.md", 24, [1, 1], 16.0, [208.0, 176.0]),
    # https://github.com/ikawrakow/ik_llama.cpp/issues/530 (no -ts: the default split, two idle RTX 5090s):
    # Qwen3-235B-A22B Q4_K_M, 94 layers, n_ctx 65536, q8_0 K and V (experts on the CPU with -ot, which moves
    # no attention tensor): 4 heads x 128 x 34/32 B x 2 x 65536 = 68 MiB a layer (+0.02 of
    # padding the log rounds); CUDA0 3264.02 MiB, CUDA1 3128.02 MiB
    ("ikawrakow/ik_llama.cpp/issues/530", 94, [1, 1], 68.0, [3264.0, 3128.0]),
]


@pytest.mark.parametrize("source, layers, split, kv_layer_mib, kv_mib", KV_SPLITS,
                         ids=[k[0] for k in KV_SPLITS])
def test_layer_cards_match_the_kv_each_card_of_a_real_split_held(source, layers, split, kv_layer_mib, kv_mib):
    cards = llama.layer_cards(layers, split)[:layers]  # the repeating layers (the KV cache's)
    assert [cards.count(d) * kv_layer_mib for d in range(len(split))] == kv_mib
    # and the bytes: the KV spread by layer lands on each card as the log shows
    mib = 2**20
    got = llama.layer_split(int(layers * kv_layer_mib * mib), layers, split)
    assert [round(b / mib, 2) for b in got] == kv_mib


@pytest.mark.parametrize("flash", [False, True])
def test_flash_attn_of_a_llamacpp_entry_sizes_and_launches_it(flash):
    """A llama.cpp entry's flash_attn is the plan's --flash-attn: its compute buffer and the server's -fa."""
    text = ('[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen2.5-0.5b"\nruntime = "llama.cpp"\n'
            f'quant = "Q4_0"\ncontext = 8192\nusers = 4\nflash_attn = {str(flash).lower()}\n')
    r = cardfit.stack(text=text)
    p = _plan("qwen2.5-0.5b", "RTX 4090", runtime="llama.cpp", quant="Q4_0", context=8192, batch=4,
              flash_attn=flash)
    assert r["devices"][0]["entries"][0]["bytes"] == p["memory"]["total_bytes"]
    line = next(ln for ln in r["bundle"]["text"].splitlines() if "llama-server" in ln)
    words = shlex.split(line)
    assert words[words.index("-fa") + 1] == ("on" if flash else "off")


@pytest.mark.parametrize("flash", [False, True])
def test_ollama_flash_attn_is_one_server_setting_for_every_model(flash):
    """OLLAMA_FLASH_ATTENTION is read once by `ollama serve` for every runner: the value one Ollama entry
    states sizes both models as `cardfit plan --flash-attn` does and is the bundle's one setting."""
    text = ('[machine]\ngpu = ["RTX 3060 12GB"]\n[[model]]\nmodel = "llama-3.1-8b"\nruntime = "ollama"\n'
            f'quant = "Q4_K_M"\ncontext = 3900\nusers = 4\nflash_attn = {str(flash).lower()}\n'
            '[[model]]\nmodel = "gemma-2-2b"\nruntime = "ollama"\nquant = "Q4_0"\ncontext = 3900\n')
    r = cardfit.stack(text=text)
    entries = {e["model"]: e["bytes"] for e in r["devices"][0]["entries"]}
    for model, quant in (("llama-3.1-8b", "Q4_K_M"), ("gemma-2-2b", "Q4_0")):
        p = _plan(model, "RTX 3060 12GB", runtime="ollama", quant=quant, context=3900, batch=4,
                  flash_attn=flash)
        assert entries[model] == p["memory"]["total_bytes"], model
    env = [w for w in shlex.split(next(ln for ln in r["bundle"]["text"].splitlines() if "ollama serve" in ln))
           if w.startswith("OLLAMA_FLASH_ATTENTION=")]
    assert env == [f"OLLAMA_FLASH_ATTENTION={int(flash)}"]


def test_a_split_card_holds_what_the_nixiesearch_log_shows():
    """memory_stack.toml's two records through `cardfit stack`: weights and KV per card within 0.5 % of the
    log's model + KV buffers (CUDA0 104.91 + 208, CUDA1 226.06 + 176 MiB: the tied output matrix on the
    second card), beside each card's own context and compute buffer (flash attention off, as the run) and
    the pipeline's 3 more copies of the f32 KQ mask (32768 cells x 512 tokens); each card's whole buffers
    within 1 % of the log's."""
    text = (ROOT / "src/cardfit/data/validation/memory_stack.toml").read_text(encoding="utf-8")
    rec = tomllib.loads(text)["record"][0]
    r = cardfit.stack(text=rec["stack"])
    p = _plan("qwen2.5-0.5b", "RTX 4090", runtime="llama.cpp", quant="Q4_0", context=8192, batch=4, gpus=2,
              flash_attn=False)
    copies = 3 * 32768 * 512 * 4
    fixed = p["memory"]["overhead_bytes"] + p["memory"]["activation_bytes"] + copies
    layered = [d["entries"][0]["bytes"] - fixed for d in r["devices"]]
    for got, want in zip(layered, [104.91 + 208.0, 226.06 + 176.0], strict=True):
        assert got / (want * 2**20) - 1 == pytest.approx(0, abs=0.005)
    buffers = [d["entries"][0]["bytes"] - p["memory"]["overhead_bytes"] for d in r["devices"]]
    for got, want in zip(buffers, [104.91 + 208.0 + 1166.01, 226.06 + 176.0 + 1166.02], strict=True):
        assert got / (want * 2**20) - 1 == pytest.approx(0, abs=0.01)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "mistral-7b"])
@given(rank=st.integers(1, 256))
def test_one_lora_slot_on_one_card_is_the_adapter(model, rank):
    m = default_models().get(model)
    assert stk.lora_slot_bytes(m, rank, 1) == lora_params(m, rank, "all") * stk.LORA_BYTES


@given(rank=st.integers(1, 64), tp=st.sampled_from([2, 4, 8]))
def test_lora_slot_under_tensor_parallel_is_between_a_share_and_the_whole(rank, tp):
    m = default_models().get("llama-3.1-70b")
    whole = stk.lora_slot_bytes(m, rank, 1)
    assert whole / tp < stk.lora_slot_bytes(m, rank, tp) < whole


# ------------------------------------------------------------------------------------ bad input


BAD = [
    ("not toml", "[machine\n", "not valid TOML"),
    ("no model", '[machine]\ngpu = ["RTX 4090"]\n', "no [[model]] table"),
    ("no gpu", '[[model]]\nmodel = "qwen3:8b"\n', "name the machine's cards"),
    ("unknown table", '[machines]\ngpu = ["RTX 4090"]\n', "unknown table 'machines'"),
    ("unknown key", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\nqaunt = "q4"\n',
     "unknown key 'qaunt'"),
    ("bad role", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\nrole = "writer"\n',
     "role must be one of"),
    ("bad card", '[machine]\ngpu = ["RTX 4900"]\n[[model]]\nmodel = "qwen3:8b"\n', "unknown GPU 'RTX 4900'"),
    ("bad model", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "llama9:1b"\n', "unknown model"),
    ("bad users", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\nusers = 0\n',
     "users must be a whole number"),
    ("flash on vllm", '[machine]\ngpu = ["H100"]\n[[model]]\nmodel = "qwen3:8b"\nruntime = "vllm"\n'
     'flash_attn = false\n', "flash_attn is a llama.cpp server's -fa or Ollama's"),
    ("ollama flash both ways", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\n'
     'runtime = "ollama"\nflash_attn = false\n[[model]]\nmodel = "gemma3:1b"\nruntime = "ollama"\n'
     'flash_attn = true\n', "state flash_attn both true and false"),
    ("flash not a bool", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\n'
     'runtime = "llama.cpp"\nflash_attn = "off"\n', "flash_attn must be true or false"),
    ("string context", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\ncontext = "8k"\n',
     "context must be a whole number"),
    ("tgi", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\nruntime = "tgi"\n',
     "cardfit stack plans vllm, sglang, llama.cpp, ollama servers"),
    ("draft alone", '[machine]\ngpu = ["H100"]\n[[model]]\nmodel = "llama3.2:1b"\nrole = "draft"\n',
     "needs a chat or vision model above it"),
    ("draft on ollama", '[machine]\ngpu = ["H100"]\n[[model]]\nmodel = "llama3.1:8b"\nruntime = "ollama"\n'
     '[[model]]\nmodel = "llama3.2:1b"\nrole = "draft"\n', "inside a vLLM server"),
    ("embed a chat model", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\nrole = "embed"\n',
     "not a embed model"),
    ("chat an embedder", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "bge-m3"\n', "is a embed model"),
    ("vision without a tower", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\n'
     'role = "vision"\n', "no vision tower"),
    ("too many cards for it", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\n'
     'runtime = "llama.cpp"\ngpus = 2\n',
     "the machine has 1 cards"),
    ("swap a vllm model", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\nruntime = "vllm"\n'
     'resident = false\n', "resident = false is for Ollama models"),
    ("rerank on ollama", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "bge-reranker-v2-m3"\n'
     'role = "rerank"\nruntime = "ollama"\n', "Ollama serves no rerankers"),
    ("long context", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "bge-m3"\nrole = "embed"\n'
     'context = 32768\n', "beyond BGE-M3's trained maximum"),
    # one `ollama serve` keeps one runner per model file: a second entry would count its memory twice
    ("one ollama model twice", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "llama3.1:8b"\n'
     '[[model]]\nmodel = "llama-3.1-8b"\nquant = "Q4_K_M"\nruntime = "ollama"\nrole = "chat"\n',
     "Ollama loads Llama 3.1 8B Q4_K_M once ([[model]] 1 lists it already)"),
    ("same model as vision and chat", '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "gemma3:12b"\n'
     'role = "vision"\n[[model]]\nmodel = "gemma3:12b"\n', "Ollama loads Gemma 3 12B"),
    ("a mac and a card", '[machine]\ngpu = ["M1 Max 64GB", "RTX 4090"]\n[[model]]\nmodel = "qwen3:8b"\n',
     "Apple M1 Max 64GB is one GPU per machine; this machine lists 2 cards"),
    # Ollama puts a model that fits one card on one card, unless OLLAMA_SCHED_SPREAD=1 splits every model
    ("ollama split for one model", '[machine]\ngpu = ["2x RTX 3090"]\n[[model]]\nmodel = "llama3.1:8b"\n'
     'gpus = 2\n[[model]]\nmodel = "qwen3:8b"\n',
     "[[model]] 2 (qwen3:8b): Ollama splits a model over every card it sees, and then every model"),
    ("two servers one port", '[machine]\ngpu = ["H100"]\n[[model]]\nmodel = "qwen3:8b"\nruntime = "vllm"\n'
     'port = 9000\n[[model]]\nmodel = "gemma3:4b"\nruntime = "llama.cpp"\nport = 9000\n',
     "[[model]] 2 (gemma3:4b): port 9000 is [[model]] 1's already"),
    ("two ollama ports", '[machine]\ngpu = ["H100"]\n[[model]]\nmodel = "qwen3:8b"\nport = 11500\n'
     '[[model]]\nmodel = "gemma3:4b"\nport = 11600\n', "the Ollama entries state ports 11500 and 11600"),
    # the rule of `plan --speculative draft:M` (services/speculative.py)
    ("a draft of another family", '[machine]\ngpu = ["H100"]\n[[model]]\n'
     'model = "meta-llama/Llama-3.1-8B-Instruct"\nruntime = "vllm"\n[[model]]\n'
     'model = "Qwen/Qwen2.5-0.5B-Instruct"\nrole = "draft"\n', "a draft needs the target's tokenizer"),
    ("a draft as large as its target", '[machine]\ngpu = ["H100"]\n[[model]]\n'
     'model = "meta-llama/Llama-3.2-1B-Instruct"\nruntime = "vllm"\n[[model]]\n'
     'model = "meta-llama/Llama-3.1-8B-Instruct"\nrole = "draft"\n', "is not smaller than Llama 3.2 1B"),
    ("adapters of another model", '[machine]\ngpu = ["H100"]\n[[model]]\n'
     'model = "meta-llama/Llama-3.1-8B-Instruct"\nruntime = "vllm"\n[[model]]\nmodel = "qwen3:8b"\n'
     'role = "adapter"\n', "adapters trained on Qwen3 8B do not load into Llama 3.1 8B"),
]


@pytest.mark.parametrize("why,text,message", BAD, ids=[b[0] for b in BAD])
def test_bad_stack_files_get_one_line(tmp_path, run_cli, why, text, message):
    f = tmp_path / "s.toml"
    f.write_text(text)
    code, out, err = run_cli("stack", str(f))
    assert code == 2, (why, out, err)
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err, err


@pytest.mark.parametrize("args,message", [
    (("/nonexistent/stack.toml",), "cannot read"),
    (("/dev/null",), "is not a regular file; point at the stack file itself, not a pipe, device or socket"),
    (("stack.yaml",), "name the machine's cards"),  # YAML is read (tests/test_stack_yaml.py), checked as TOML
    ((), "give the stack file"),
])
def test_bad_paths_get_one_line(tmp_path, run_cli, args, message):
    if args == ("stack.yaml",):
        (tmp_path / "stack.yaml").write_text("machine: {}\n")
        args = (str(tmp_path / "stack.yaml"),)
    code, _, err = run_cli("stack", *args)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_the_page_starts_from_the_rag_example():
    """The page's stack panel opens on examples/stacks/rag-4090.toml, as it is."""
    import html
    import re

    page = (ROOT / "src" / "cardfit" / "web" / "static" / "index.html").read_text()
    shown = re.search(r'<textarea id="stack-text"[^>]*>(.*?)</textarea>', page, re.S)
    assert shown and html.unescape(shown.group(1)) == (EXAMPLES / "rag-4090.toml").read_text()


_MODELS = [("qwen3:8b", "chat"), ("llama3.1:70b", "chat"), ("bge-m3", "embed"), ("gemma3:12b", "vision"),
           ("bge-reranker-v2-m3", "rerank"), ("qwen2.5:32b", "chat"),
           ("meta-llama/Llama-3.1-8B-Instruct", "chat")]
_ENTRY = st.fixed_dictionaries(
    {"pick": st.sampled_from(_MODELS)},
    optional={"runtime": st.sampled_from(["vllm", "llama.cpp", "ollama"]),
              "context": st.sampled_from([2048, 8192]), "users": st.sampled_from([1, 4, 16]),
              "resident": st.booleans(), "quant": st.sampled_from(["fp8", "Q4_K_M", "Q8_0"])})
_MACHINES = [["RTX 4090"], ["2x H100 SXM"], ["RTX 3090", "RTX 3060 12GB"], ["M1 Max 64GB"], ["2x L40S"]]


@settings(max_examples=30, deadline=None)
@given(machine=st.sampled_from(_MACHINES), entries=st.lists(_ENTRY, min_size=1, max_size=4))
def test_any_stack_is_an_answer_or_one_error_and_every_card_adds_up(machine, entries):
    import json

    from cardfit.errors import CardfitError

    text = f"[machine]\ngpu = {json.dumps(machine)}\n"
    for e in entries:
        (model, role), rest = e["pick"], {k: v for k, v in e.items() if k != "pick"}
        text += "[[model]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in
                                        {"model": model, "role": role, **rest}.items())
    try:
        r = cardfit.stack(text=text)
    except CardfitError:
        return
    assert (r["verdict"] == "no") == bool(r["unplaced"])
    for d in r["devices"]:
        resident = sum(e["bytes"] for e in d["entries"] if e["resident"])
        swapped = max((e["bytes"] for e in d["entries"] if not e["resident"]), default=0)
        assert d["free_bytes"] == d["usable_bytes"] - d["reserved_bytes"] - resident - swapped
        assert d["free_bytes"] >= 0
    servers = {e["port"] for d in r["devices"] for e in d["entries"]
               if e["port"] and e["runtime"] != "ollama"}
    lines = [ln for ln in r["bundle"]["text"].splitlines() if " --port " in ln]
    assert len(lines) == len(servers)


def test_rent_names_the_cheapest_set_that_holds_the_stack():
    """--rent: no cheaper priced set of 1, 2, 4 or 8 cards of one kind holds the set (checked by placing the
    set on every one of them), and the one named does."""
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.rental import default_rental
    from cardfit.core.fit import set_price

    r = _stack("70b-draft-lora-2xh100.toml", rent=True)
    best = r["cheapest"]
    assert best is not None and _stack("70b-draft-lora-2xh100.toml")["cheapest"] is None
    spec = stk.read_spec(stk.StackInput(file=str(EXAMPLES / "70b-draft-lora-2xh100.toml")))
    rules = default_rental()
    for g in default_gpus():
        if not g.monthly_usd:
            continue
        for n in stk.RENT_COUNTS:
            price = set_price(g, n, rules)
            if price < best["monthly_usd"]:
                assert stk._left(spec.__class__((g,) * n, None, spec.entries), ()) != 0, (g.name, n)
    g = default_gpus().get(best["gpu"])
    assert stk._left(spec.__class__((g,) * best["count"], None, spec.entries), ()) == 0


def test_models_on_the_command_line_are_a_stack_file(run_json):
    """--model [ROLE=]NAME repeated, with --gpu, --runtime, --context and --users for every model, is the
    same set as the file that lists them."""
    cli = run_json("stack", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--model", "embed=bge-m3",
                   "--gpu", "RTX 4090", "--runtime", "vllm", "--context", "8192", "--users", "4")
    text = ('[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "meta-llama/Llama-3.1-8B-Instruct"\n'
            'runtime = "vllm"\ncontext = 8192\nusers = 4\n[[model]]\nmodel = "bge-m3"\nrole = "embed"\n'
            'runtime = "vllm"\ncontext = 8192\nusers = 4\n')
    assert cli == cardfit.stack(text=text)


@pytest.mark.parametrize("args,message", [
    (("--model", "qwen3:8b"), "name the machine's cards"),
    (("--model", "qwen3:8b", "--gpu", "RTX 4090", "--text", "[machine]"), "not both"),
    ((str(EXAMPLES / "rag-4090.toml"), "--context", "4096"), "go with --model"),
    # a misspelt role was read as part of the model's name ("unknown model 'embedd=bge-m3'")
    (("--model", "embedd=bge-m3", "--gpu", "RTX 4090"), "--model embedd=bge-m3: unknown role 'embedd'"),
])
def test_model_options_refused_one_line(run_cli, args, message):
    code, _, err = run_cli("stack", *args)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_target_names_the_served_model_by_its_number():
    """A draft below two chat models goes to the one `target` names ([[model]] numbers start at 1), else to
    the nearest chat model above it."""
    head = ('[machine]\ngpu = ["H100 SXM"]\n'
            '[[model]]\nmodel = "meta-llama/Llama-3.1-8B-Instruct"\nruntime = "vllm"\ncontext = 4096\n'
            '[[model]]\nmodel = "meta-llama/Llama-3.2-3B-Instruct"\nruntime = "vllm"\ncontext = 4096\n'
            '[[model]]\nmodel = "meta-llama/Llama-3.2-1B-Instruct"\nrole = "draft"\n')  # a draft for either
    for extra, host in (("target = 1\n", 0), ("", 1)):
        spec = stk.read_spec(stk.StackInput(text=head + extra))
        assert spec.entries[2].target == host
        machine, _ = stk.solve(spec, ())
        (server,) = [p for p in machine.placed if p.server.riders]
        assert server.server.entry.index == host


@pytest.mark.parametrize("ram_gb,says", [(None, "keep 8.3 GB there"), (4, "more than the machine's 4.0 GB"),
                                         (64, "of the machine's 64.0 GB")])
def test_system_ram_the_lora_cache_takes(ram_gb, says):
    text = (EXAMPLES / "70b-draft-lora-2xh100.toml").read_text()
    if ram_gb:
        text = text.replace('gpu = ["2x H100 SXM"]', f'gpu = ["2x H100 SXM"]\nram_gb = {ram_gb}')
    r = cardfit.stack(text=text)
    (line,) = [n for n in r["notes"] if n.startswith("system RAM")]
    assert says in line
    # once per server, not per card
    host = sum(e["host_bytes"] for d in r["devices"] for e in d["entries"])
    assert host == 20 * lora_params(default_models().get("llama-3.1-70b"), 16, "all") * 2


@pytest.mark.parametrize("model,quant,pulled", [
    ("llama-3.1-8b", "Q4_K_M", "llama3.1:8b"),  # the library tag of that quantization (models.toml)
    ("meta-llama/Llama-3.1-8B-Instruct", "Q4_K_M", "llama3.1:8b"),  # a Hub id too
    ("llama3.1:8b", "Q4_K_M", "llama3.1:8b"),  # the tag the user named
])
def test_an_ollama_bundle_pulls_a_library_tag_not_a_catalog_id(model, quant, pulled):
    """`ollama pull` fetches Ollama library tags: a model named by its catalog or Hub id is pulled by the
    library's tag of the planned quantization ([[model.ollama]] rows), not by a name Ollama lacks."""
    text = (f'[machine]\ngpu = ["RTX 3060 12GB"]\n[[model]]\nmodel = "{model}"\nruntime = "ollama"\n'
            f'quant = "{quant}"\ncontext = 4096\n')
    lines = cardfit.stack(text=text)["bundle"]["text"].splitlines()
    pulls = [shlex.split(ln)[-1] for ln in lines if "ollama pull" in ln]
    assert pulls == [pulled]


# ------------------------------------------------------------------ vLLM 0.34's margin on a shared card

_SHARED_H100 = '''[machine]
gpu = ["H100 SXM"]
[[model]]
model = "qwen3-32b"
runtime = "sglang"
quant = "fp8"
context = 8192
users = 4
[[model]]
model = "llama-3.1-8b"
runtime = "vllm"
context = {context}
users = 8
'''


def test_a_vllm_server_plan_refuses_on_one_card_the_stack_refuses_too():
    """vLLM 0.34 sizes its KV cache as min(its share, the memory free at startup less max(1 GiB, 0.75 x its
    transient peak)) (vllm/v1/worker/extensible_kv_cache.py 592-618): Llama 3.1 8B at 60,000 tokens x 8 on
    one H100 needs 2.5 GB more than the card (`cardfit plan`); the stack placed it alone with 0.18 GB free."""
    single = cardfit.plan("llama-3.1-8b", gpu="h100-sxm", runtime="vllm", context=60000, batch=8, gpus=1)
    assert single["gpus"][0]["verdict"] == "no"
    r = cardfit.stack(text=_SHARED_H100.format(context=60000))
    assert "llama-3.1-8b" in [u["model"] for u in r["unplaced"]]


@pytest.mark.parametrize("context", [8000, 16000, 24000, 30000])
def test_every_vllm_server_finds_its_share_and_margin_free_when_it_starts(context):
    """Whatever the placement, each vLLM 0.34 server on a card finds its share plus its margin free once the
    servers the bundle starts before it are loaded (stack._start_order)."""
    machine, _ = stk.solve(stk.read_spec(stk.StackInput(text=_SHARED_H100.format(context=context))), ())
    for d, gpu in enumerate(machine.gpus):
        taken = 0
        for p in stk._start_order(machine):
            if d not in p.devices:
                continue
            taken += sum(x.bytes for x in p.pieces[p.devices.index(d)])
            if p.utilization is not None:
                margin = p.sized.ctx.engine.startup_margin(p.sized.memory, gpu)
                room = gpu.usable_bytes - machine.reserved[d]
                assert taken + margin <= room, (p.server.entry.model, context)
