"""Mutation run over the search, the memory model, the served-load model and the cost arithmetic.

    python scripts/mutate.py                 # every mutant; exit 1 if any survives
    python scripts/mutate.py --area memory   # one area (search, memory, serving, cost)
    python scripts/mutate.py --list          # the mutants, not run

Each mutant is a hand-written plausible bug: one exact snippet of one file and its replacement. The tree
(src/, tests/, README, docs, pyproject) is copied once into a temporary directory; each mutant is applied to
that copy, the area's fast test subset is run against it (`python -m pytest -x -q`, PYTHONPATH = the copy's
src/, a time limit per mutant), and the file is restored. A mutant is killed when the tests fail (or time
out); it survives when they pass. No dependency beyond pytest."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("src", "tests", "docs", "README.md", "CHANGELOG.md", "pyproject.toml", "scripts", "benchmarks")
LIMIT_S = 120  # per mutant: a mutant that makes a search or a fixed-point loop run on is a kill


@dataclass(frozen=True)
class Mutant:
    area: str
    path: str  # under src/cardfit/
    old: str  # exact snippet, must occur exactly once
    new: str
    why: str


# The fast test subset each area's mutants are run against (the tests that hold the arithmetic by hand).
TESTS = {
    "search": ["tests/test_mutants.py::TestSearch", "tests/test_deploy.py", "tests/test_properties.py"],
    "memory": ["tests/test_mutants.py::TestMemory", "tests/test_kv_pool.py", "tests/test_properties.py"],
    "serving": ["tests/test_mutants.py::TestServing", "tests/test_properties.py",
                "tests/test_prefix_reuse.py"],
    "cost": ["tests/test_mutants.py::TestCost", "tests/test_cost.py",
             "tests/test_bill.py::test_breakeven_blends_the_cached_share_of_the_prompt",
             "tests/test_bill.py::test_buy_month_by_hand",
             "tests/test_bill.py::test_after_the_crossing_month_owning_is_cheaper"],
}

D, SV, KV, MEM, W, CO, BE = ("services/deploy.py", "core/serving.py", "core/kv.py", "core/memory.py",
                             "core/weights.py", "core/cost.py", "services/breakeven.py")
RU = "core/reuse.py"

MUTANTS: tuple[Mutant, ...] = (
    # ---- the deployment search -----------------------------------------------------------------------
    Mutant("search", D, "return timed[smallest_true(meets, lo + 1, hi)]", "return timed[hi]",
           "no bisection: the first doubling that meets, not the fewest replicas"),
    Mutant("search", D, "return timed[smallest_true(meets, lo + 1, hi)]",
           "return timed[smallest_true(meets, lo + 2, hi)]", "off by one: lo + 1 never tried"),
    Mutant("search", D,
           "        res = evaluate(inp, c, most, t)\n        if not res.meets:\n            return None\n",
           "        return None\n", "doubling past the limit gives up instead of trying the limit itself"),
    Mutant("search", D, "int(inp.budget_usd_month // c.price) + 1)", "int(inp.budget_usd_month // c.price))",
           "budget limit forgets the set discount: one affordable replica too few"),
    Mutant("search", D, "most = min(most, inp.max_cards // c.cards)", "most = min(most, inp.max_cards)",
           "--max-cards counted in replicas, not cards"),
    Mutant("search", D, "most = min(most, math.ceil(inp.users))",
           "most = min(most, math.ceil(inp.users) // 2)",
           "users cap halves the replicas"),
    Mutant("search", D, "r.count if unpriced else 0, r.served.tpot_s,", "0, r.served.tpot_s,",
           "unpriced cards not ranked by the cards they take"),
    Mutant("search", D, "return (math.inf if unpriced else r.monthly_usd, r.count if unpriced else 0, "
           "r.served.tpot_s,\n            r.served.ttft_s)",
           "return (math.inf if unpriced else r.monthly_usd, r.count if unpriced else 0, "
           "r.served.ttft_s,\n            r.served.tpot_s)", "_key ties broken by TTFT before TPOT"),
    Mutant("search", D, "a <= rent and b <= cards and c <= tpot and e <= ttft for",
           "a <= rent or b <= cards or c <= tpot or e <= ttft for",
           "pareto: dominated when beaten on any one axis, not all"),
    Mutant("search", D, "held = float(lo + 1) if lo < cap", "held = float(lo) if lo < cap",
           "throughput floor above the fewest replicas that meet (a replica takes up to B_t + 1 users)"),
    # ---- the memory model ----------------------------------------------------------------------------
    Mutant("memory", KV, "        elems = 2 * m.kv_heads * m.head_dim\n",
           "        elems = m.kv_heads * m.head_dim\n",
           "K only: the V half of the cache forgotten"),
    Mutant("memory", KV, "cached = m.layers - m.linear_layers - m.kv_shared_layers",
           "cached = m.layers - m.linear_layers", "layers sharing KV counted as caching their own"),
    Mutant("memory", KV, "win_tokens = min(context, lay.window) if window_cache",
           "win_tokens = max(context, lay.window) if window_cache", "sliding window grows past the context"),
    Mutant("memory", KV, '"q8_0": 34,', '"q8_0": 32,', "q8_0 block scale forgotten (34 bytes per 32 values)"),
    Mutant("memory", KV, "    return tp / split\n", "    return float(tp)\n",
           "KV replication: a full copy per rank even when ranks split the heads"),
    Mutant("memory", KV, "STATE_BYTES = 4", "STATE_BYTES = 2",
           "linear-attention state kept in bf16, not fp32"),
    Mutant("memory", KV, "conv = max(m.linear_conv_kernel - 1, 0) * (2 * kdim + vdim) * 2",
           "conv = m.linear_conv_kernel * (2 * kdim + vdim) * 2", "conv state one column too wide"),
    Mutant("memory", KV, "return sequences * min(n_ctx // sequences, -(-(window + n_ubatch) // pad) * pad)",
           "return sequences * min(n_ctx // sequences, (window + n_ubatch) // pad * pad)",
           "llama.cpp sliding-window cells padded down"),
    Mutant("memory", MEM, "return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes + "
           "self.activation_bytes", "return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes",
           "total forgets the activations"),
    Mutant("memory", MEM, "return -(-context // pad) * pad", "return context // pad * pad",
           "context padded down instead of up"),
    Mutant("memory", MEM, "return Memory(w.total_bytes - host + pad,", "return Memory(w.total_bytes + pad,",
           "weights kept in host RAM counted on the card too"),
    Mutant("memory", W, "scale = m.params / total_params if m.params else 1.0  # shapes give",
           "scale = 1.0  # shapes give", "shapes' parameter count not scaled to the stated count"),
    Mutant("memory", W, "nbytes = round(m.params * t.bits_per_weight / 8)",
           "nbytes = round(m.params * t.bits_per_weight / 8 * 1.05)", "5 % too many bytes per weight"),
    Mutant("memory", W, "inner = sum(1 for layer, n in positions if 0 < layer < n - 1)",
           "inner = sum(1 for layer, n in positions if 0 <= layer < n - 1)",
           "ffn_inner scope quantizes the first layer too"),
    # ---- the served-load model -----------------------------------------------------------------------
    Mutant("serving", SV,
           "prompt = others * b * prefilled(w) / max(w.output_tokens, 1)\n    if prompt <= 0:\n"
           "        return step_s(r, b, 0.0)",
           "prompt = b * prefilled(w) / max(w.output_tokens, 1)\n    if prompt <= 0:\n"
           "        return step_s(r, b, 0.0)",
           "a request's own prompt rides its decode steps"),
    Mutant("serving", SV, "return (1 - share) * step_s(r, b, 0.0) + share * step_s(r, b, chunk)",
           "return step_s(r, b, prompt)", "prompt spread thinly over every step"),
    Mutant("serving", SV, "full = prompt_step_s(r, batch, free) / r.pp if chunks > 1",
           "full = prompt_step_s(r, batch, free) if chunks > 1", "pipeline stages do not overlap the chunks"),
    Mutant("serving", SV, "last = new - (chunks - 1) * free", "last = free",
           "the last chunk timed as a full one"),
    Mutant("serving", SV, "slot_wait = max(users - m, 0.0) * in_service / m",
           "slot_wait = max(users - m, 0.0) * in_service", "users past the slots wait a whole service each"),
    Mutant("serving", SV, "out = m * o / in_service if in_service else 0.0",
           "out = users * o / in_service if in_service else 0.0",
           "throughput counts users waiting for a slot"),
    Mutant("serving", SV, "others = max(m - 1.0, 0.0) / m\n    ahead_steps", "others = 1.0\n    ahead_steps",
           "closed loop: a user's own prompt counted as another's"),
    Mutant("serving", SV, "c = max(1, min(int(concurrency), n))", "c = max(1, int(concurrency))",
           "rounds: more requests in flight than sent"),
    Mutant("serving", SV, "budget = max(chunk - decodes, min(chunk, 256))", "budget = chunk",
           "rounds: decodes take no room in the step's token budget"),
    Mutant("serving", SV, "return max(w.input_tokens - w.cached_tokens, 1.0) if w.input_tokens else 0.0",
           "return w.input_tokens", "prefix reuse: the cached tokens are prefilled anyway"),
    Mutant("serving", RU, "return min(reuse.shared_prefix_tokens, i) / reuse.turns + ",
           "return min(reuse.shared_prefix_tokens, i) + ", "prefix reuse: the shared prefix hits every turn"),
    Mutant("serving", RU, "return min(max(capacity, 0.0) / working_set, 1.0)", "return 1.0",
           "prefix reuse: the cache never runs out of room"),
    Mutant("serving", RU, "host_share = max(host - gpu_share, 0.0)", "host_share = host",
           "KV offload: the host tier's copies counted beside the GPU's own hits"),
    # ---- the cost arithmetic -------------------------------------------------------------------------
    Mutant("cost", CO, "return hourly_usd * MILLION / (tokens_per_s * SECONDS_PER_HOUR * duty)",
           "return hourly_usd * MILLION / (tokens_per_s * SECONDS_PER_HOUR)", "$/M ignores idle hours"),
    Mutant("cost", CO, "return tokens_per_s * SECONDS_PER_HOUR * hours_per_month / MILLION",
           "return tokens_per_s * 60 * hours_per_month / MILLION", "capacity in minutes"),
    Mutant("cost", CO, "return 1.0 / seconds / max(retry_multiplier, 1.0)", "return 1.0 / seconds",
           "retries cost nothing"),
    Mutant("cost", CO, "return output_usd_per_m + per_input * input_per_output",
           "return output_usd_per_m + per_input", "input price billed once per output million"),
    Mutant("cost", CO, "per_input = (1 - cached_fraction) * input_usd_per_m + cached_fraction * cached",
           "per_input = input_usd_per_m", "cache hits billed as plain input"),
    Mutant("cost", CO, "return self.power_w * self.pue * self.hours_per_month / 1000",
           "return self.power_w * self.hours_per_month / 1000", "owned power without the site's PUE"),
    Mutant("cost", CO, "return math.inf if gain <= 0 else capex_usd / gain",
           "return math.inf if gain <= 0 else capex_usd / other_usd_month",
           "buying overtakes as if it cost nothing to run"),
    Mutant("cost", CO, "return max(hours_used, min_term_days * 24)",
           "return min(hours_used, min_term_days * 24)",
           "minimum term caps instead of floors"),
    Mutant("cost", CO, "return unit_monthly_usd * count * (1 - discount_fraction)",
           "return unit_monthly_usd * count * (1 + discount_fraction)", "discount added"),
    Mutant("cost", CO, "HOURS_PER_MONTH = 720", "HOURS_PER_MONTH = 730",
           "calendar month instead of the 720 h term"),
    Mutant("cost", BE, "idle_hours = rent.billed_hours * (1 - duty)", "idle_hours = rent.billed_hours * duty",
           "idle hours are the busy ones"),
    Mutant("cost", BE, '"rent" if own < c.price_per_million_usd else "api"',
           '"rent" if own > c.price_per_million_usd else "api"', "cheaper side inverted"),
    Mutant("cost", BE, "if b is not None and b < monthly))", "if b is not None and b > monthly))",
           "bill table: APIs dearer than the rent listed as cheaper"),
)


def check_snippets(root: Path) -> list[str]:
    """The mutants whose snippet no longer occurs exactly once (the code moved on: fix the table)."""
    bad = []
    for i, mu in enumerate(MUTANTS):
        n = (root / "src" / "cardfit" / mu.path).read_text().count(mu.old)
        if n != 1:
            bad.append(f"#{i} {mu.path}: snippet occurs {n} times ({mu.why})")
    return bad


def copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)


def run_tests(tree: Path, tests: list[str], limit_s: float) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "--timeout", str(int(limit_s)), "-o", "addopts=", *tests]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return "killed (timeout)", time.monotonic() - start
    took = time.monotonic() - start
    if proc.returncode == 0:
        return "SURVIVED", took
    if proc.returncode == 1:
        return "killed", took
    return f"error rc={proc.returncode}: {proc.stdout[-300:]}{proc.stderr[-300:]}", took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--area", choices=sorted(TESTS), action="append", help="only this area (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--limit", type=float, default=LIMIT_S, help="seconds per mutant (default %(default)s)")
    args = ap.parse_args(argv)
    bad = check_snippets(ROOT)
    if bad:
        print("stale mutants:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 2
    chosen = [(i, mu) for i, mu in enumerate(MUTANTS) if not args.area or mu.area in args.area]
    if args.list:
        for i, mu in chosen:
            print(f"#{i:<3} {mu.area:8} {mu.path:22} {mu.why}")
        return 0
    survivors = 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: the temporary tree is still removed
    with tempfile.TemporaryDirectory(prefix="cardfit-mutate-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        base, took = run_tests(tree, sorted({t for _, mu in chosen for t in TESTS[mu.area]}), args.limit * 3)
        if base != "SURVIVED":
            print(f"the unmutated tree fails its tests ({base}): nothing to measure", file=sys.stderr)
            return 2
        print(f"unmutated: tests pass ({took:.0f} s)")
        print(f"{'#':>3}  {'area':8} {'file':22} {'result':16} {'s':>5}  why")
        for i, mu in chosen:
            target = tree / "src" / "cardfit" / mu.path
            original = target.read_text()
            target.write_text(original.replace(mu.old, mu.new, 1))
            try:
                result, took = run_tests(tree, TESTS[mu.area], args.limit)
            finally:
                target.write_text(original)
            survivors += result == "SURVIVED" or result.startswith("error")
            print(f"{i:>3}  {mu.area:8} {mu.path:22} {result[:16]:16} {took:5.0f}  {mu.why}", flush=True)
            if result.startswith("error"):
                print("     " + result, flush=True)
    print(f"{len(chosen) - survivors} of {len(chosen)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
