"""Extract the option names of `vllm serve` and `python -m sglang.launch_server` from their released
wheels, so that tests can check every flag cardfit's launch commands emit against the real tool.

    pip download --no-deps vllm==0.24.0 sglang==0.5.9 -d /tmp/wheels
    python scripts/runtime_options.py /tmp/wheels/vllm-0.24.0-*.whl /tmp/wheels/sglang-0.5.9-*.whl

The releases are data/releases.toml's current ones: the release cardfit models is the one its launch
commands start (data/runtimes.toml `image` names it).

Writes tests/data/runtime_options/{vllm,sglang}.toml. The files are parsed with `ast`, never imported or
run: the wheels need CUDA and PyTorch, and cardfit only needs the names. llama-server, trtllm-serve and
Ollama are transcribed by hand in the same folder from their documented option tables (each file names its
source and commit).

vLLM declares its engine options as string literals in `add_argument(...)` calls in
vllm/engine/arg_utils.py; the KV cache dtypes are `CacheDType` in vllm/config/cache.py and the
quantization methods `QuantizationMethods` in vllm/model_executor/layers/quantization/__init__.py.
SGLang generates its options from annotated dataclass fields (sglang/srt/arg_groups/arg_utils.py:
`--` + field name with `-` for `_`, plus `aliases`, unless `no_cli=True`) in sglang/srt/arg_groups/fields/;
before that package (0.5.9 and older) they are `add_argument` calls in sglang/srt/server_args.py.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "runtime_options"


def _read(wheel: zipfile.ZipFile, name: str) -> ast.Module:
    return ast.parse(wheel.read(name).decode())


def _add_argument_flags(tree: ast.AST) -> set[str]:
    flags: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                    flags.add(a.value)
    return flags


def _literal(tree: ast.AST, name: str) -> list[str]:
    """The strings of `name = Literal[...]` or `name = [...]`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets):
            value = node.value.slice if isinstance(node.value, ast.Subscript) else node.value
            return [e.value for e in getattr(value, "elts", []) if isinstance(e, ast.Constant)]
    raise SystemExit(f"{name} not found")


def vllm(path: str) -> dict:
    with zipfile.ZipFile(path) as w:
        flags = _add_argument_flags(_read(w, "vllm/engine/arg_utils.py"))
        kv = _literal(_read(w, "vllm/config/cache.py"), "CacheDType")
        quant = _literal(_read(w, "vllm/model_executor/layers/quantization/__init__.py"),
                         "QuantizationMethods")
    return {"flags": flags, "choices": {"--kv-cache-dtype": kv, "--quantization": quant},
            "files": "vllm/engine/arg_utils.py, vllm/config/cache.py, "
                     "vllm/model_executor/layers/quantization/__init__.py"}


def _arg_meta(ann: ast.expr) -> tuple[bool, dict] | None:
    """(is a CLI option, Arg keywords) for an `A[T, "help"]` / `A[T, Arg(...)]` annotation."""
    if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"):
        return None
    elts = getattr(ann.slice, "elts", [])
    if len(elts) < 2:
        return None
    meta = elts[1]
    if isinstance(meta, ast.Call) and getattr(meta.func, "id", "") == "Arg":
        return True, {k.arg: k.value for k in meta.keywords}
    if isinstance(meta, ast.Constant | ast.JoinedStr | ast.BinOp | ast.Tuple):
        return True, {}
    return None


def sglang(path: str) -> dict:
    flags: set[str] = set()
    choices: dict[str, list[str]] = {}
    with zipfile.ZipFile(path) as w:
        names = [n for n in w.namelist()
                 if n.startswith("sglang/srt/arg_groups/fields/") and n.endswith(".py")]
        for name in names:
            for node in ast.walk(_read(w, name)):
                if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                    continue
                found = _arg_meta(node.annotation)
                if not found:
                    continue
                kw = found[1]
                if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value:
                    continue
                cli = kw["cli_name"].value if isinstance(kw.get("cli_name"), ast.Constant) else \
                    "--" + node.target.id.replace("_", "-")
                flags.add(cli)
                for a in getattr(kw.get("aliases"), "elts", []):
                    flags.add(a.value)
                if isinstance(kw.get("choices"), ast.List):
                    choices[cli] = [e.value for e in kw["choices"].elts if isinstance(e, ast.Constant)]
        server_args = _read(w, "sglang/srt/server_args.py")
        flags |= _add_argument_flags(server_args)
        if names:
            files = ("sglang/srt/arg_groups/fields/*.py, sglang/srt/server_args.py, "
                     "sglang/srt/arg_groups/choices.py")
            choices["--quantization"] = _literal(_read(w, "sglang/srt/arg_groups/choices.py"),
                                                 "QUANTIZATION_CHOICES")
        else:  # before the arg_groups package (0.5.9 and older): add_argument calls in server_args.py
            files = "sglang/srt/server_args.py"
            choices["--quantization"] = _literal(server_args, "QUANTIZATION_CHOICES")
            choices.update(_add_argument_choices(server_args))
    keep = {k: v for k, v in choices.items() if k in ("--kv-cache-dtype", "--quantization")}
    return {"flags": flags, "choices": keep, "files": files}


def _add_argument_choices(tree: ast.AST) -> dict[str, list[str]]:
    """The literal `choices=[...]` of each `add_argument("--flag", ...)` call."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            for k in node.keywords:
                if k.arg == "choices" and isinstance(k.value, ast.List) and names:
                    out[names[0]] = [e.value for e in k.value.elts if isinstance(e, ast.Constant)]
    return out


def _toml_list(values: list[str]) -> str:
    lines, line = [], "  "
    for v in values:
        item = f'"{v}", '
        if len(line) + len(item) > 108:
            lines.append(line.rstrip())
            line = "  "
        line += item
    lines.append(line.rstrip())
    return "[\n" + "\n".join(lines) + "\n]"


def write(tool: str, command: str, version: str, wheel: str, data: dict) -> Path:
    out = OUT / f"{tool}.toml"
    body = [f"# Generated by scripts/runtime_options.py from {Path(wheel).name}; do not edit by hand.",
            f'tool = "{command}"', f'version = "{version}"',
            f'source = "https://pypi.org/project/{tool}/{version}/ ({data["files"]})"',
            f"flags = {_toml_list(sorted(data['flags']))}", "", "[choices]"]
    body += [f'"{k}" = {_toml_list(v)}' for k, v in sorted(data["choices"].items())]
    out.write_text("\n".join(body) + "\n")
    return out


def main(argv: list[str]) -> int:
    for wheel in argv:
        m = re.match(r"(vllm|sglang)-([0-9][^-]*)-", Path(wheel).name)
        if not m:
            raise SystemExit(f"not a vllm or sglang wheel: {wheel}")
        tool, version = m.groups()
        data = vllm(wheel) if tool == "vllm" else sglang(wheel)
        command = "vllm serve" if tool == "vllm" else "python -m sglang.launch_server"
        print(write(tool, command, version, wheel, data), len(data["flags"]), "flags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
