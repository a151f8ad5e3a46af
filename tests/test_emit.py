"""`cardfit deploy --emit compose|k8s`: the chosen deployment as manifests that run exactly the printed
command. Each manifest is parsed back with PyYAML and its container lines compared with the printed
command's words; the YAML writer is checked against PyYAML on arbitrary data."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cardfit.catalog.releases import container_image, current_release, runtime_named
from cardfit.catalog.runtimes import default_runtimes
from cardfit.errors import InputError
from cardfit.runtimes.launch import HEAD_NODE_IP
from cardfit.services import emit
from cardfit.services.table import BY_NAME

OPTIONS = Path(__file__).parent / "data" / "runtime_options"
TOOL_FILE = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm-serve", "llama.cpp": "llama-server",
             "ollama": "ollama"}
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_405B = "meta-llama/Llama-3.1-405B-Instruct"


def deploy(**values):
    return BY_NAME["deploy"].call(values)


def printed(command: str) -> tuple[dict[str, str], list[str]]:
    """(environment, argv) of a printed launch command: the files it writes first (here-documents) and the
    notes after it (`  # …`) left out."""
    line = command.split("  # ")[0].rsplit("\nEOF\n", 1)[-1].replace("\\\n", " ")
    words = shlex.split(line)
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    return env, words


def container_words(c: dict, row) -> list[str]:
    """The words a container runs: its command, or the image's entrypoint words and its args."""
    return c["command"] if "command" in c else [*row.image_entrypoint, *c["args"]]


# (runtime, cards, load, what the case covers)
K8S_CASES = [
    ("vllm", ["H100"], dict(users=64), "one card, the whole line as the container command"),
    ("vllm", ["L40S"], dict(users=2000), "replicas: one Deployment, replicas > 1"),
    ("llama.cpp", ["H100"], dict(users=64), "the image's ENTRYPOINT is llama-server: the flags are its args"),
    ("ollama", ["H100"], dict(users=16), "configured by environment: `ollama serve` and env"),
    ("trtllm", ["H100"], dict(users=64), "a file it reads (--config): a ConfigMap mounted as its cwd"),
    ("sglang", ["H100"], dict(users=64), "listens on 127.0.0.1 by default: --host 0.0.0.0 appended"),
]


def data_parallel(argv: list[str]) -> int:
    """The copies of the model the printed command's one server runs (its data-parallel flag, else 1)."""
    for flag in ("--data-parallel-size", "--dp-size"):
        if flag in argv:
            return int(argv[argv.index(flag) + 1])
    return 1


@pytest.mark.parametrize(("runtime", "gpus", "load", "why"), K8S_CASES,
                         ids=[f"{c[0]}-{c[1][0]}-{next(iter(c[2].values()))}" for c in K8S_CASES])
def test_k8s_runs_the_printed_command(runtime, gpus, load, why):
    r = deploy(model=LLAMA_8B, runtime=runtime, gpu=gpus, emit="k8s", **load)
    best, row = r.best, default_runtimes().get(runtime)
    env, argv = printed(best.command)
    docs = list(yaml.safe_load_all(r.emit.text))
    kinds = [d["kind"] for d in docs]
    assert kinds == (["ConfigMap"] if r.best.runtime == "trtllm" else []) + ["Deployment", "Service"], why
    dep, svc = docs[-2], docs[-1]
    dp = data_parallel(argv)  # copies one server runs (vLLM --data-parallel-size, SGLang --dp-size)
    assert dep["spec"]["replicas"] * dp == best.replicas
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == container_image(row)
    assert container_words(c, row) == argv + list(row.image_listen), why
    assert {e["name"]: e["value"] for e in c.get("env", [])} == env
    assert c["resources"]["limits"] == {"nvidia.com/gpu": best.cards_per_node * dp}
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["port"] == c["ports"][0]["containerPort"] == row.port
    if kinds[0] == "ConfigMap":  # the file the line names, where the container starts
        (name,) = docs[0]["data"]
        assert name in argv and c["workingDir"] == emit.FILES_DIR
        assert f"cat > {name} <<'EOF'\n{docs[0]['data'][name].rstrip()}\nEOF" in best.command


@pytest.mark.parametrize(("runtime", "gpus", "load"), [
    ("vllm", ["L40S"], dict(users=2000)),  # 8 replicas of one card in one node: one data-parallel server
    ("vllm", ["RTX 4090"], dict(users=64, max_cards=4, quant="bf16")),  # TP over the cards of one replica
    ("ollama", ["H100"], dict(users=16)),
    ("trtllm", ["H100"], dict(users=64)),
])
def test_compose_gives_each_replica_its_own_cards(runtime, gpus, load):
    r = deploy(model=LLAMA_8B, runtime=runtime, gpu=gpus, emit="compose", **load)
    best, row = r.best, default_runtimes().get(runtime)
    env, argv = printed(best.command)
    doc = yaml.safe_load(r.emit.text)
    services = list(doc["services"].values())
    dp = data_parallel(argv)
    assert len(services) * dp == best.replicas
    cards, ports = [], []
    for svc in services:
        words = svc.get("entrypoint") or [*row.image_entrypoint, *svc["command"]]
        assert words == argv + list(row.image_listen)
        assert svc.get("environment", {}) == env
        (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and len(device["device_ids"]) == best.cards_per_node * dp
        cards += device["device_ids"]
        ports.append(svc["ports"][0])
    assert cards == [str(i) for i in range(best.count)]  # no two replicas share a card
    assert len(set(ports)) == len(ports) and all(p.endswith(f":{row.port}") for p in ports)
    for cfg in svc.get("configs", []):
        assert doc["configs"][cfg["source"]]["content"] in best.command


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_a_replica_across_nodes_is_a_leaderworkerset(runtime):
    r = deploy(model=LLAMA_405B, runtime=runtime, quant="bf16", gpu=["H100"], users=16, emit="k8s")
    best, row = r.best, default_runtimes().get(runtime)
    per_replica = best.nodes // best.replicas
    assert per_replica > 1, "the case must span nodes"
    _, argv = printed(best.command)
    lws, svc = yaml.safe_load_all(r.emit.text)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and lws["kind"] == "LeaderWorkerSet"
    spec = lws["spec"]
    assert spec["replicas"] == best.replicas and spec["leaderWorkerTemplate"]["size"] == per_replica
    leader = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    worker = spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    head = [a.replace(HEAD_NODE_IP, emit.LWS_LEADER) for a in argv] + list(row.image_listen)
    assert HEAD_NODE_IP in best.command and container_words(leader, row) == head
    rank = [i for i, (a, b) in enumerate(zip(head, container_words(worker, row), strict=True)) if a != b]
    assert len(rank) == 1 and head[rank[0]] == "0" and container_words(worker, row)[rank[0]] == emit.LWS_RANK
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == best.cards_per_node
    assert svc["spec"]["selector"] == spec["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]


def test_json_carries_the_manifest_beside_the_report(run_cli):
    code, out, err = run_cli("deploy", LLAMA_8B, "--users", "64", "--runtime", "vllm", "--gpu", "H100",
                             "--emit", "compose", "--json")
    import json

    data = json.loads(out)
    assert code == 0, err
    assert data["emit"]["format"] == "compose" and data["best"]["runtime"] == "vllm"
    code, text, err = run_cli("deploy", LLAMA_8B, "--users", "64", "--runtime", "vllm", "--gpu", "H100",
                              "--emit", "compose")
    assert code == 0 and text == data["emit"]["text"], err  # text mode: the manifest alone


def test_the_readme_example_is_real_output(run_cli):
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("$ cardfit deploy") and "--emit" in x)
    shown = readme.split(line + "\n", 1)[1].split("```", 1)[0]
    code, out, err = run_cli(*shlex.split(line)[2:])
    assert code == 0 and out == shown, err


@pytest.mark.parametrize(("args", "message"), [
    (["--users", "64", "--emit", "helm"], "Error: --emit must be 'compose' or 'k8s' (got 'helm')"),
    (["--users", "64", "--gpu", "MI300X", "--emit", "k8s"],
     "Error: --emit writes manifests for NVIDIA (CUDA) cards; the chosen deployment runs on MI300X"),
    (["--users", "64", "--gpu", "RTX 4090", "--tpot-ms", "1", "--emit", "k8s"],
     "Error: --emit: nothing meets the targets, so there is no deployment to write"),
])
def test_an_unsupported_request_is_one_line(run_cli, args, message):
    code, out, err = run_cli("deploy", LLAMA_8B, *args)
    assert code == 2 and out == ""
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("runtime", "fmt", "message"), [
    ("vllm", "compose", "--emit compose runs on one machine; each replica of this deployment spans 2 nodes"),
    # TensorRT-LLM goes across nodes through MPI: its line names no rank to give each pod
    ("trtllm", "k8s", "--emit k8s: trtllm's launch line names no node rank"),
])
def test_what_a_format_cannot_hold(runtime, fmt, message):
    with pytest.raises(InputError, match=message):
        deploy(model=LLAMA_405B, runtime=runtime, quant="bf16", gpu=["H100"], users=16, emit=fmt)


# ------------------------------------------------------------------------------- the catalog rows

@pytest.mark.parametrize("row", [r for r in default_runtimes() if r.serves], ids=lambda r: r.id)
def test_every_serving_runtime_names_its_image(row):
    known = tomllib.loads((OPTIONS / f"{TOOL_FILE[row.id]}.toml").read_text())
    assert row.image and row.port > 0 and row.image_source.startswith("https://")
    # what the image's ENTRYPOINT runs is the start of the tool's command line
    assert known["tool"].split()[:len(row.image_entrypoint)] == list(row.image_entrypoint)
    for flag in row.image_listen[::2]:  # --host 0.0.0.0: the flag exists in the tool
        assert flag in known["flags"], flag
    image = container_image(row)
    if known["version"][0].isdigit():  # an option list made from a release: the image is that release
        assert image.endswith(known["version"]), (image, known["version"])
    if "{release}" in row.image:  # the release cardfit models is the one the image starts
        assert image.endswith(current_release(row.id)), (image, current_release(row.id))


@pytest.mark.parametrize(("runtime", "image"), [
    ("vllm", "vllm/vllm-openai:v0.34.0"),  # data/releases.toml current
    ("vllm@0.10.1.1", "vllm/vllm-openai:v0.10.1.1"),  # a release asked for starts that release
    ("vllm@0.8.2 (V0 engine)", "vllm/vllm-openai:v0.8.2"),
    ("sglang@0.5.4.post2", "lmsysorg/sglang:v0.5.4.post2"),
    ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.2.1"),  # data/releases.toml current
    ("trtllm@1.2.0", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"),
    ("ollama", "ollama/ollama:0.33.3"),  # no {release} in the row: the image as written
])
def test_the_image_is_the_release_modelled(runtime, image):
    assert container_image(runtime_named(runtime, default_runtimes().find)) == image


# ------------------------------------------------------------------------------- the YAML writer

_TEXT = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=12)
_SCALARS = st.one_of(_TEXT, st.integers(-10**12, 10**12), st.booleans(), st.none())
_DATA = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(_TEXT, inner, max_size=4)),
                     max_leaves=20)


@given(st.dictionaries(_TEXT, _DATA, max_size=5))
def test_yaml_reads_back_as_written(data):
    assert yaml.safe_load(emit.yaml(data)) == (data or None)


@pytest.mark.parametrize(("value", "why"), [
    ({"on": "yes", "n": "null"}, "YAML 1.1 booleans and null as keys and values stay strings"),
    ({"a": "x: y # z", "b": "- [1]"}, "indicators inside a string"),
    ({"a": "line\nnext\tTAB \x7f\x00"}, "control characters and DEL, which JSON leaves unescaped"),
    ({"a": [[], {}, [1, [2]]]}, "empty and nested collections"),
])
def test_yaml_edge_cases(value, why):
    assert yaml.safe_load(emit.yaml(value)) == value, why


def test_a_pinned_deployment_is_emitted_too(run_cli):
    """--emit with a pinned split (--tp N) writes that deployment's manifest: the pinned answer returned
    before the emit step and printed its text instead (exit 0, no manifest)."""
    code, out, err = run_cli("deploy", "llama-3.1-8b", "--users", "8", "--gpu", "H100 SXM", "--runtime",
                             "vllm", "--tp", "1", "--emit", "compose")
    assert code == 0 and err == ""
    assert out.startswith("# cardfit deploy --emit compose: llama-3.1-8b on vllm")
    assert "services:" in out and "Cheapest" not in out
