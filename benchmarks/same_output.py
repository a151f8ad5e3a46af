"""Proof that a speed-up changed nothing users see (not a test): runs a table of commands (plan, speed,
deploy, the reverse questions, finetune, breakeven, the catalogs; text and --json) with this tree's src/
and with REV's (from `git archive`), each in a new process on the same interpreter, and compares stdout,
stderr and the exit status byte for byte. Each tree gets its own catalog cache, and every command runs
twice in it (the first run may parse the TOML and write the cache, the second reads it): both must match.

    .venv/bin/python benchmarks/same_output.py [REV] [--validate]

REV defaults to `main`; --validate adds `validate --json` (~20 s of CPU per tree). Exit status 1 on any
difference, with the first differing lines of each.
"""

from __future__ import annotations

import difflib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLAN = [
    ["plan", "llama-3.1-8b", "--gpu", "RTX 4090"],
    ["plan", "llama3.1:8b", "--gpu", "RTX 4090"],
    ["plan", "llama3.1:8b"],
    ["plan", "meta-llama/Llama-3.3-70B-Instruct", "--quant", "fp8", "--context", "32768", "--runtime", "vllm",
     "--top", "8"],
    ["plan", "--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "bf16",
     "--context", "8192"],
    ["plan", "llama3.1:70b", "--quant", "bf16", "--context", "8192", "--gpu", "H200", "--gpus", "1",
     "--runtime", "llama.cpp"],
    ["plan", "llama3.1:405b", "--quant", "fp8", "--context", "8192", "--gpu", "MI300X", "--gpus", "4",
     "--runtime", "vllm"],
    ["plan", "qwen3:30b", "--gpu", "RTX 3090"],
    ["plan", "deepseek-r1-671b", "--quant", "fp8"],
    ["plan", "gpt-oss-20b", "--gpu", "RTX 4090", "--batch", "8", "--runtime", "vllm"],
    ["plan", "mixtral-8x7b", "--quant", "Q4_K_M", "--gpu", "RTX 4090", "--gpus", "1"],
    ["plan", "meta-llama/Llama-3.1-70B-Instruct", "--quant", "bf16", "--context", "131072", "--batch", "16",
     "--runtime", "vllm"],
    ["plan", "llama-3.1-8b", "--gpu", "RTX 4900"],  # an error: one line, exit 2
]
OTHERS = [
    ["speed", "llama-3.1-8b", "--gpu", "H100"],
    ["speed", "llama-3.1-8b", "--gpu", "RTX 4090", "--runtime", "llama.cpp", "--quant", "Q4_K_M"],
    ["speed", "qwen3-30b-a3b", "--gpu", "H100", "--runtime", "vllm"],
    ["deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--ttft-ms", "1500", "--tpot-ms", "50",
     "--runtime", "vllm"],
    ["deploy", "meta-llama/Llama-3.1-8B-Instruct", "--requests-per-s", "5", "--input-tokens", "1000",
     "--output-tokens", "300", "--ttft-ms", "2000", "--tpot-ms", "50"],
    # the deploy search's memos (issue 25 item 19): a MoE closed loop over every runtime, a 70B under
    # arrivals, a spread of lengths, named cards with llama.cpp slots, limits, a launch manifest
    ["deploy", "Qwen/Qwen3-30B-A3B", "--users", "32", "--ttft-ms", "1500", "--tpot-ms", "50"],
    ["deploy", "meta-llama/Llama-3.3-70B-Instruct", "--requests-per-s", "5", "--input-tokens", "1000",
     "--output-tokens", "300", "--ttft-ms", "2000", "--tpot-ms", "50"],
    ["deploy", "Qwen/Qwen3-30B-A3B", "--requests-per-s", "3", "--input-tokens", "4000", "--output-tokens",
     "800", "--input-tokens-p90", "8000", "--output-tokens-p90", "2000"],
    ["deploy", "qwen3:30b-a3b", "--users", "8", "--gpu", "RTX 4090", "--gpu", "RTX 5090", "--runtime",
     "llama.cpp"],
    ["deploy", "meta-llama/Llama-3.3-70B-Instruct", "--users", "64", "--gpu", "H100", "--gpu", "H200",
     "--gpu", "A100", "--max-cards", "8"],
    ["deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "64", "--runtime", "vllm", "--emit", "k8s"],
    ["max-context", "qwen2.5:14b", "--gpu", "RTX 4060 Ti"],
    ["max-sequences", "llama-3.1-8b", "--gpu", "H100", "--context", "8192", "--runtime", "vllm"],
    ["largest-model", "--gpu", "RTX 4090", "--quant", "Q4_K_M"],
    ["finetune", "llama-3.1-8b", "--method", "lora"],
    ["breakeven", "--hourly", "0.50", "--tokens-per-s", "400", "--hours-per-month", "730"],
    ["breakeven", "--model", "llama-3.1-8b", "--gpu", "H100"],
    ["gpus"],
    ["models"],
    ["quants"],
    ["apis"],
]


def commands(validate: bool) -> list[list[str]]:
    out = []
    for args in (*PLAN, *OTHERS):
        out += [args, [*args, "--json"]]
    if validate:
        out.append(["validate", "--json"])
    return out


def run(src: str, cache: str, args: list[str]) -> tuple[int, bytes, bytes]:
    env = {**os.environ, "PYTHONPATH": src, "XDG_CACHE_HOME": cache, "COLUMNS": "100"}
    env.pop("CARDFIT_NO_CACHE", None)
    p = subprocess.run([sys.executable, "-m", "cardfit", *args], capture_output=True, env=env)
    return p.returncode, p.stdout, p.stderr


def show(a: bytes, b: bytes) -> str:
    old, new = a.decode(errors="replace").splitlines(), b.decode(errors="replace").splitlines()
    lines = difflib.unified_diff(old, new, "REV", "this tree", lineterm="", n=1)
    return "\n".join(list(lines)[:20])


def main() -> int:
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    rev = argv[0] if argv else "main"
    tmp = tempfile.mkdtemp(prefix="cardfit-same-")
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True)
        if archive.returncode:
            print(f"{rev}: not in this checkout ({archive.stderr.decode().strip()})")
            return 2
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(os.path.join(tmp, "rev"), filter="data")
        trees = {"this tree": str(ROOT / "src"), rev: os.path.join(tmp, "rev", "src")}
        bad = n = 0
        for args in commands("--validate" in sys.argv):
            got = {}
            for name, src in trees.items():
                cache = os.path.join(tmp, "cache-" + ("new" if name == "this tree" else "old"))
                got[name] = [run(src, cache, args) for _ in range(2)]  # cache cold (maybe), then warm
            n += 1
            mine, theirs = got["this tree"], got[rev]
            if mine[0] == mine[1] == theirs[0] == theirs[1]:
                continue
            bad += 1
            print(f"DIFFERS: cardfit {' '.join(args)}")
            for i, (a, b) in enumerate(zip(theirs, mine, strict=True)):
                if a != b:
                    print(f"  run {i + 1}: exit {a[0]} vs {b[0]}\n{show(a[1], b[1])}\n{show(a[2], b[2])}")
            if mine[0] != mine[1] or theirs[0] != theirs[1]:
                print("  (a cold-cache run differs from the warm one)")
        print(f"{n - bad} of {n} commands byte-identical to {rev} (stdout, stderr, exit status)")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
