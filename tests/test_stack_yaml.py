"""`cardfit stack FILE.yaml` (issue 27's "YAML with the same keys"): a YAML stack file is parsed by PyYAML's
safe loader, bounded like the TOML one, and goes through the same checks; the YAML and TOML forms of a stack
give the same answer, and bad YAML (syntax, object tags, alias bombs, odd keys) is one line."""

from __future__ import annotations

import time
import tomllib

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.errors import InputError
from cardfit.services import stack as stk

from .conftest import ROOT

EXAMPLES = ROOT / "examples" / "stacks"
TOMLS = sorted(p.name for p in EXAMPLES.glob("*.toml"))


def _as_yaml(toml_name: str) -> str:
    """The TOML example's tables written as YAML: `machine:` a mapping, `model:` a list of mappings."""
    return yaml.safe_dump(tomllib.loads((EXAMPLES / toml_name).read_text()), sort_keys=False)


@pytest.mark.parametrize("name", TOMLS)
def test_the_yaml_form_of_every_readme_stack_gives_the_same_json(name, tmp_path):
    """The four README stacks, TOML and YAML, as a file (by its extension) and as text (format="yaml")."""
    want = cardfit.stack(str(EXAMPLES / name))
    f = tmp_path / name.replace(".toml", ".yml")
    f.write_text(_as_yaml(name))
    assert cardfit.stack(str(f)) == want
    assert cardfit.stack(text=_as_yaml(name), format="yaml") == want


def test_the_yaml_example_is_the_rag_toml_example(run_json):
    """examples/stacks/rag-4090.yaml (the form the README and --help show) is rag-4090.toml, key for key,
    and `cardfit stack` gives the same JSON for both."""
    a = yaml.safe_load((EXAMPLES / "rag-4090.yaml").read_text())
    b = tomllib.loads((EXAMPLES / "rag-4090.toml").read_text())
    assert a == b
    as_yaml, as_toml = (run_json("stack", str(EXAMPLES / f"rag-4090.{x}")) for x in ("yaml", "toml"))
    assert as_yaml == as_toml


def test_format_overrides_the_extension(tmp_path):
    f = tmp_path / "stack.txt"
    f.write_text(_as_yaml("vision-chat-mac.toml"))
    assert cardfit.stack(str(f), format="yaml") == cardfit.stack(str(EXAMPLES / "vision-chat-mac.toml"))
    with pytest.raises(InputError, match="is not valid TOML"):
        cardfit.stack(str(f))  # a .txt file is TOML unless --format yaml


def _laughs(levels: int) -> str:
    """The "billion laughs": each level a list of nine aliases of the one before, 9**levels strings from a
    file of under a kilobyte."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


BAD_YAML = [
    ("syntax", "machine: [\n",
     "is not valid YAML (expected the node content, but found '<stream end>' at line 2"),
    ("tab indent", "machine:\n\tgpu: RTX 4090\n",
     "found character '\\t' that cannot start any token at line 2"),
    ("python object tag", '!!python/object/apply:os.system ["echo owned"]\n',
     "could not determine a constructor for the tag"),
    ("a list, not a mapping", "- model: qwen3:8b\n", "a stack file is a mapping of a machine and its models "
                                                       "(got a list)"),
    ("empty", "# nothing\n", "(got nothing)"),
    ("number key", "machine:\n  gpu: [RTX 4090]\n1: x\n", "every key must be text (got 1)"),
    ("billion laughs", _laughs(9), "more than 10,000 values (aliases count each time they are used)"),
    # an alias inside its own anchor: a list that contains itself (a cycle, not only a tree)
    ("self-containing list", "machine: &m\n  gpu: &g [RTX 4090, *g]\n", "more than 10,000 values"),
    ("laughs in a value", _laughs(6) + "machine:\n  gpu: [RTX 4090]\nmodel:\n  - model: qwen3:8b\n"
     "    context: *l6\n", "more than 10,000 values"),
    ("deep nesting", "a: " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    ("not UTF-8", "machine: \udcff\n", "is not valid YAML (invalid start byte at byte 9)"),
    # the same strict checks as TOML after parsing
    ("unknown key", "machine:\n  gpu: [RTX 4090]\nmodel:\n  - model: qwen3:8b\n    contxt: 8192\n",
     "unknown key 'contxt'"),
    ("yes is a bool, not a count",
     "machine:\n  gpu: [RTX 4090]\nmodel:\n  - model: qwen3:8b\n    users: yes\n",
     "users must be a whole number from 1 to 65,536 (got True)"),
    ("no cards", "machine: {}\nmodel:\n  - model: qwen3:8b\n", "name the machine's cards"),
    # PyYAML keeps the last of a repeated key without a word; TOML refuses it, and so does cardfit
    ("a table twice", "machine:\n  gpu: [RTX 4090]\nmachine:\n  gpu: [RTX 3090]\n"
     "model:\n  - model: qwen3:8b\n",
     "is not valid YAML (the key 'machine' is given twice at line 3, column 1)"),
    ("a key twice in a model", "machine:\n  gpu: [RTX 4090]\nmodel:\n  - model: qwen3:8b\n    context: 4096\n"
     "    context: 32768\n", "the key 'context' is given twice at line 6, column 5"),
    ("a model mapping, not a list", "machine:\n  gpu: [RTX 4090]\nmodel:\n  model: qwen3:8b\n",
     "no [[model]] table; list each model as a [[model]] table (YAML: model: a list of mappings"),
]


def test_a_merge_key_may_be_overridden():
    """`<<: *anchor` then a key of the merged mapping is YAML's override, not a repeated key: the entry reads
    as the same mapping written out."""
    merged = ("machine:\n  gpu: [H100 SXM]\nmodel:\n  - &base\n    model: meta-llama/Llama-3.1-8B-Instruct\n"
              "    runtime: vllm\n    context: 8192\n  - <<: *base\n    context: 4096\n")
    plain = ("machine:\n  gpu: [H100 SXM]\nmodel:\n  - model: meta-llama/Llama-3.1-8B-Instruct\n"
             "    runtime: vllm\n    context: 8192\n  - model: meta-llama/Llama-3.1-8B-Instruct\n"
             "    runtime: vllm\n    context: 4096\n")
    assert cardfit.stack(text=merged, format="yaml") == cardfit.stack(text=plain, format="yaml")


@pytest.mark.parametrize("why,text,message", BAD_YAML, ids=[b[0] for b in BAD_YAML])
def test_bad_yaml_is_one_line(tmp_path, run_cli, why, text, message):
    f = tmp_path / "stack.yaml"
    f.write_bytes(text.encode("utf-8", "surrogateescape"))
    started = time.monotonic()
    code, out, err = run_cli("stack", str(f))
    assert code == 2, (why, out, err)
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert time.monotonic() - started < 30  # bounded work: the bombs are refused, not walked


def test_a_billion_laughs_is_refused_before_any_walk():
    """9**9 (387 million) strings stand behind a 700-byte text: the count stops at 10,000 of them."""
    text = _laughs(9)
    assert len(text) < 1000
    started = time.monotonic()
    with pytest.raises(InputError, match="more than 10,000 values"):
        stk.read_spec(stk.StackInput(text=text, format="yaml"))
    assert time.monotonic() - started < 5


def test_a_yaml_file_over_the_size_limit_is_not_parsed(tmp_path, run_cli):
    f = tmp_path / "big.yaml"
    f.write_text("# " + "x" * stk.MAX_STACK_BYTES + "\n")
    code, _, err = run_cli("stack", str(f))
    assert code == 2 and err.count("\n") == 1 and "over the 262,144-byte limit" in err, err


def test_format_goes_with_a_file_not_with_model_options():
    with pytest.raises(InputError, match="--format is the stack file's"):
        cardfit.stack(model=["qwen3:8b"], gpu=["RTX 4090"], format="yaml")


def test_the_web_api_reads_yaml_text():
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    client = TestClient(create_app())
    toml_text = (EXAMPLES / "vision-chat-mac.toml").read_text()
    a = client.post("/api/stack", json={"text": toml_text})
    b = client.post("/api/stack", json={"text": _as_yaml("vision-chat-mac.toml"), "format": "yaml"})
    assert a.status_code == b.status_code == 200 and a.json() == b.json()
    bad = client.post("/api/stack", json={"text": _laughs(9), "format": "yaml"})
    assert bad.status_code == 400 and "more than 10,000 values" in bad.text
    odd = client.post("/api/stack", json={"text": toml_text, "format": "json"})
    assert odd.status_code in (400, 422)


_VALUES = st.one_of(st.integers(-3, 70_000), st.floats(allow_nan=False, allow_infinity=False, width=32),
                    st.booleans(), st.sampled_from(["qwen3:8b", "bge-m3", "vllm", "ollama", "chat", "embed",
                                                    "adapter", "fp8", "Q4_K_M", "", "x\ny"]))
_KEYS = st.sampled_from(["model", "role", "runtime", "quant", "context", "users", "requests_per_s",
                         "resident", "lora_rank", "adapters", "contxt"])


@settings(max_examples=25, deadline=None)
@given(cards=st.lists(st.sampled_from(["RTX 4090", "2x H100 SXM", "RTX 3060 12GB"]), min_size=0, max_size=2),
       models=st.lists(st.dictionaries(_KEYS, _VALUES, max_size=5), min_size=0, max_size=3))
def test_any_table_reads_the_same_from_toml_and_yaml(cards, models):
    """One path after parsing: the same tables as TOML and as YAML give the same spec, or the same error."""
    import json

    from cardfit.errors import CardfitError

    data = {"machine": {"gpu": cards}, "model": models}
    toml_text = f"[machine]\ngpu = {json.dumps(cards)}\n" + "".join(
        "[[model]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in m.items()) for m in models)

    def read(text: str, fmt: str) -> object:
        try:
            return stk.read_spec(stk.StackInput(text=text, format=fmt))
        except CardfitError as e:
            return str(e)

    assert tomllib.loads(toml_text) == (data if models else {"machine": {"gpu": cards}})
    assert read(toml_text, "toml") == read(yaml.safe_dump(data if models else {"machine": {"gpu": cards}}),
                                           "yaml")
