"""Speed benchmark (not a test): CLI cold start, a sweep over every catalog model × quantization × GPU × four
contexts, and a full `cardfit deploy` search for one model over the whole catalog. Prints times and ratios;
the targets are < 0.5 s for the CLI, < 1 s for the sweep and < 1 s (p50) for the deploy search. With
`--against`, the `cardfit plan` question is also timed side by side with the previous release.

It ends with the speed goals of issue 25 (items 18 and 19), each figure beside its goal: `cardfit plan` one
card <= 0.12 s CPU, `cardfit validate` <= 5 s CPU, `cardfit deploy` <= 0.5 s CPU for each of its questions
(Qwen3-30B-A3B among them), and the web page's every-card plan at 32 clients p99 <= 300 ms (`--no-web`
leaves that one out). Nothing here asserts a time: it prints them.

    .venv/bin/python benchmarks/bench_cli.py [--against] [--no-web]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def cold_start(args: list[str], runs: int = 7) -> float:
    return cold_start_cpu(args, runs)[0]


def cold_start_cpu(args: list[str], runs: int = 7) -> tuple[float, float]:
    """p50 wall and CPU seconds of `cardfit ARGS` in a new process (CPU: what it costs on an idle machine;
    wall also counts what other processes take from it)."""
    import resource

    times, cpu = [], []
    for _ in range(runs):
        r0, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run([sys.executable, "-m", "cardfit", *args], capture_output=True, check=True)
        times.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return statistics.median(times), statistics.median(cpu)


# The previous release, timed side by side with this tree (`--against`): on a shared machine a fixed figure
# from another day is no yardstick; runs of the two, interleaved, see the same load.
PREVIOUS_RELEASE = ("0.3.0", "6a4494a")  # the commit that made 0.3.0 (CHANGELOG.md)
PLAN_TEXT = ["plan", "llama3.1:8b", "--gpu", "RTX 4090"]


def side_by_side(rev: str, runs: int = 15) -> list[str]:
    """p50 wall and CPU of the `cardfit plan` question (text and --json) for this tree and for `rev` (its src/
    from `git archive`, on this interpreter and packages), runs interleaved; a line per question and tree."""
    import os
    import resource
    import shutil
    import tarfile
    import tempfile

    root = Path(__file__).resolve().parents[1]
    tmp = tempfile.mkdtemp(prefix="cardfit-bench-")
    try:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src"], capture_output=True)
        if archive.returncode:
            return [f"previous release {rev}: not in this checkout ({archive.stderr.decode().strip()})"]
        with tarfile.open(fileobj=__import__("io").BytesIO(archive.stdout)) as tar:
            try:
                tar.extractall(tmp, filter="data")
            except TypeError:  # Python before 3.11.4: no extraction filters (a tree of our own repository)
                tar.extractall(tmp)  # noqa: S202
        trees = {"this tree": str(root / "src"), f"{rev}": os.path.join(tmp, "src")}
        for src in trees.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", src], capture_output=True)
        lines = []
        for args in (PLAN_TEXT, [*PLAN_TEXT, "--json"]):
            wall: dict[str, list[float]] = {k: [] for k in trees}
            cpu: dict[str, list[float]] = {k: [] for k in trees}
            for _ in range(runs):
                for name, src in trees.items():
                    env = {**os.environ, "PYTHONPATH": src}
                    r0, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                    subprocess.run([sys.executable, "-m", "cardfit", *args], capture_output=True, check=True,
                                   env=env)
                    wall[name].append(time.perf_counter() - t)
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu[name].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            w = {k: statistics.median(v) for k, v in wall.items()}
            c = {k: statistics.median(v) for k, v in cpu.items()}
            new, old = trees
            lines.append(f"plan llama3.1:8b --gpu 'RTX 4090' {'--json' if '--json' in args else '(text)':6s} "
                         f"side by side: this tree p50 "
                         f"{w[new] * 1000:.0f} ms (CPU {c[new] * 1000:.0f}), {old} {w[old] * 1000:.0f} ms "
                         f"(CPU {c[old] * 1000:.0f}): {w[new] / w[old]:.2f}x wall, "
                         f"{c[new] / c[old]:.2f}x CPU")
        return lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def versus(seconds: float) -> str:
    return (f"{seconds / GOAL_S:.2f}x the {GOAL_S * 1000:.0f} ms goal, "
            f"{seconds / LLMFIT_S:.2f}x llmfit's {LLMFIT_S * 1000:.0f} ms, "
            f"{seconds / RELEASE_0_1_0_S:.2f}x 0.1.0's {RELEASE_0_1_0_S * 1000:.0f} ms")


def goal_line(text: float, text_cpu: float, one: float, one_cpu: float) -> str:
    """The project's goal for `cardfit plan` on one card, met or not on this run's p50 wall time; the CPU
    time is what the same answer takes on an idle machine (wall time also counts other processes' share)."""
    worst = max(text, one)
    verdict = "met" if worst <= GOAL_S else f"NOT met ({worst / GOAL_S:.2f}x)"
    return (f"goal: cardfit plan one card <= {GOAL_S * 1000:.0f} ms wall (p50): {verdict}; text "
            f"{text * 1000:.0f} ms wall / {text_cpu * 1000:.0f} ms CPU, --json {one * 1000:.0f} ms wall / "
            f"{one_cpu * 1000:.0f} ms CPU")


def sweep() -> tuple[int, float, float, dict[str, int]]:
    """Every catalog model × quantization (uniform types and GGUF mixes) × GPU × four contexts: the memory
    model once per model × quantization × context, then the single-card verdict on every GPU, a list in card
    order (core/fit.py classify_many over each runtime's CardBudgets; a card that cannot compute in the
    quantization's format says no)."""
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.models import default_models
    from cardfit.catalog.quants import GgufMix, default_quants
    from cardfit.catalog.rental import default_rental
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.core.fit import CardBudgets, Verdict, classify_many, need_on
    from cardfit.core.memory import MemorySettings, estimate
    from cardfit.runtimes import adapter

    t, cpu = time.perf_counter(), time.process_time()
    qc, rts, rules = default_quants(), default_runtimes(), default_rental()
    gpus = list(default_gpus())
    quants = [q for q in (*qc.types, *qc.mixes) if not (getattr(q, "kind", "") == "gguf")]
    runtimes = {name: adapter(rts.get(name)) for name in ("llama.cpp", "vllm")}
    budgets: dict[tuple[str, object], CardBudgets] = {}
    for name, rt in runtimes.items():
        for requires in {getattr(q, "requires", None) for q in quants}:
            budgets[name, requires] = CardBudgets([rt.budget_per_card(g) if requires is None
                                                   or g.supports(requires) else -1 for g in gpus])
    contexts = (4096, 8192, 32768, 131072)
    settings = {(name, context): MemorySettings(context=context, prefill_chunk=rt.profile.prefill_chunk)
                for name, rt in runtimes.items() for context in contexts}  # the same for every model
    per_runtime = {name: [settings[name, context] for context in contexts] for name in runtimes}
    n = no = tight = 0
    NO, TIGHT = Verdict.NO, Verdict.TIGHT
    for m in default_models():
        for q in quants:
            name = "llama.cpp" if isinstance(q, GgufMix) else "vllm"
            rt, cards = runtimes[name], budgets[name, getattr(q, "requires", None)]
            for s in per_runtime[name]:
                answers = classify_many(need_on(estimate(m, q, rt, s), 1), cards, rules)
                no += answers.count(NO)
                tight += answers.count(TIGHT)
                n += len(answers)
    verdicts = {Verdict.FITS: n - no - tight, Verdict.TIGHT: tight, Verdict.NO: no}
    return n, time.perf_counter() - t, time.process_time() - cpu, {str(v): c for v, c in verdicts.items()}


# `cardfit plan llama3.1:8b --gpu "RTX 4090" --json` took 0.28 s (p50) with cardfit 0.1.0 on the project's
# 2-core test machine, where llmfit answers the same question in 0.11 s (issue 13); the goal is 0.12 s.
RELEASE_0_1_0_S = 0.28
LLMFIT_S = 0.11
GOAL_S = 0.12


DEPLOY_QUESTION = {"model": "meta-llama/Llama-3.1-8B-Instruct", "requests_per_s": 5.0, "input_tokens": 1000,
                   "output_tokens": 300, "ttft_ms": 2000.0, "tpot_ms": 50.0}


def deploy_search(runs: int = 5) -> tuple[float, float, dict]:
    """p50 wall and CPU seconds of a full deploy search (every priced card × cards per node × runtime × quant
    × KV type, each sized, then timed unless its price already rules it out) for one model, in-process after
    one warm-up run (catalogs parsed, model resolved; the step timings it memoized are forgotten before each
    run). CPU time is what the search costs on an idle machine; wall time also counts what other processes
    take from this one."""
    from cardfit.services.deploy import DeployInput, clear_memos, deploy_report

    inp = DeployInput(**DEPLOY_QUESTION)
    report = deploy_report(inp)
    wall, cpu = [], []
    for _ in range(runs):
        clear_memos()  # the timings memoized by the last run: each run times the search as a new question
        t, c = time.perf_counter(), time.process_time()
        deploy_report(inp)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu), report.to_json()


# Issue 25's speed goals (items 18 and 19), in CPU seconds of one process (what an answer costs on an idle
# machine; wall time on a shared machine also counts other processes) or, for the web page, p99 latency.
PLAN_CPU_GOAL_S = 0.12
VALIDATE_CPU_GOAL_S = 5.0
DEPLOY_CPU_GOAL_S = 0.5
WEB_P99_GOAL_MS = 300.0
WEB_CLIENTS = 32
WEB_PER_CLIENT = 4  # uncached every-card plans per client: 128 in all, a few seconds of server CPU
# The deploy questions: the README's example, the same load for a mixture of experts, the search over
# every runtime for an 8B and a 70B model under arrivals, and --cards 8 with no load and no --gpu (the most
# users 8 cards of any priced kind serve: every set that splits them, on every runtime; 2.3-4.7 s before
# most_users skipped the sets whose own cap cannot reach the best found).
DEPLOY_CASES = (
    ["deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--ttft-ms", "1500", "--tpot-ms", "50",
     "--runtime", "vllm"],
    ["deploy", "Qwen/Qwen3-30B-A3B", "--users", "32", "--ttft-ms", "1500", "--tpot-ms", "50"],
    ["deploy", "meta-llama/Llama-3.1-8B-Instruct", "--requests-per-s", "5", "--input-tokens", "1000",
     "--output-tokens", "300", "--ttft-ms", "2000", "--tpot-ms", "50"],
    ["deploy", "meta-llama/Llama-3.3-70B-Instruct", "--requests-per-s", "5", "--input-tokens", "1000",
     "--output-tokens", "300", "--ttft-ms", "2000", "--tpot-ms", "50"],
    ["deploy", "meta-llama/Llama-3.3-70B-Instruct", "--cards", "8"],
    ["deploy", "Qwen/Qwen3-30B-A3B", "--cards", "8"],
)


def cpu_of(args: list[str], runs: int) -> float:
    """p50 CPU seconds of `cardfit ARGS` in a new process (any exit status: a deploy with no answer exits
    3)."""
    import resource

    cpu = []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "cardfit", *args], capture_output=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return statistics.median(cpu)


def against_goal(what: str, value: float, goal: float, unit: str) -> str:
    verdict = "met" if value <= goal else f"NOT met ({value / goal:.2f}x)"
    shown = f"{value:.0f}" if unit == "ms" else f"{value:.3f}"
    return f"  {what:76s} {shown:>8s} {unit}  goal <= {goal:g} {unit}: {verdict}"


def web_every_card(workers: int = 1) -> tuple[float, float, int, int, float | None]:
    """p50 and p99 ms, requests and errors of WEB_CLIENTS clients at once on `cardfit serve`, each sending
    WEB_PER_CLIENT of the page's every-card plan (POST /api/plan with a model and no card), every one with its
    own context so that none is answered from the app's memory of recent answers; and the server's CPU
    milliseconds per request (None where /proc is not there), its workers' included (`cardfit serve
    --workers N`). A process computes one answer at a time (the GIL), so with the clients all waiting the p50
    is about WEB_CLIENTS x that CPU / N on an idle machine with N free cores."""
    import asyncio
    import statistics

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from load_web import _client, _raw, pct, server

    with server(None, ("--workers", str(workers)) if workers > 1 else ()) as (base, pid):
        host, port = base.removeprefix("http://").rsplit(":", 1)

        def plan(i: int) -> bytes:
            return _raw("POST", "/api/plan", {"model": "llama3.1:8b", "context": 2048 + i}, f"{host}:{port}")

        asyncio.run(_client(host, int(port), [plan(0)]))  # warm-up: catalogs loaded
        work = [[plan(1 + k * WEB_PER_CLIENT + i) for i in range(WEB_PER_CLIENT)] for k in range(WEB_CLIENTS)]

        async def run() -> list[tuple[list[float], int]]:
            return await asyncio.gather(*(_client(host, int(port), w) for w in work))

        cpu0 = _tree_cpu_s(pid)
        done = asyncio.run(run())
        cpu1 = _tree_cpu_s(pid)
    lat = [x for lat, _ in done for x in lat]
    cpu_ms = (cpu1 - cpu0) / len(lat) * 1e3 if cpu0 is not None and cpu1 is not None else None
    return statistics.median(lat), pct(lat, 99), len(lat), sum(e for _, e in done), cpu_ms


def _process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a running process (Linux /proc/PID/stat fields 14 and 15)."""
    import os

    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _tree_cpu_s(pid: int | None) -> float | None:
    """CPU seconds of a process and of its running children (the server's workers)."""
    own = _process_cpu_s(pid)
    if own is None or pid is None:
        return own
    kids = []
    for name in (n for n in os.listdir("/proc") if n.isdigit()):
        try:
            with open(f"/proc/{name}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return own + sum(_process_cpu_s(k) or 0.0 for k in kids)


def validate_folds() -> str:
    """Whether validate read its prebuilt folds and runs (data/snapshot/validation_folds.json,
    validation_runs.json) or refitted and stepped them: a stale file costs it most of its time."""
    from cardfit.validation.calibrate import prebuilt_folds
    from cardfit.validation.validate import prebuilt_runs

    files = (("folds", prebuilt_folds()), ("runs", prebuilt_runs()))
    stale = [name for name, fresh in files if fresh is None]
    if not stale:
        return "prebuilt folds and runs"
    return f"{' and '.join(stale)} STALE, computed: run scripts/build_catalog.py"


def goals(plan_cpu: float) -> list[str]:
    """Issue 25's speed goals, each figure beside its goal."""
    lines = ["issue 25 speed goals (CPU: one process's user + system time, p50):",
             against_goal("cardfit plan llama3.1:8b --gpu 'RTX 4090' (item 18)", plan_cpu, PLAN_CPU_GOAL_S,
                          "s CPU")]
    validate = cpu_of(["validate", "--json"], runs=1)
    lines.append(against_goal(f"cardfit validate --json (one run; {validate_folds()})", validate,
                              VALIDATE_CPU_GOAL_S, "s CPU"))
    for args in DEPLOY_CASES:
        cpu = cpu_of(args, runs=3)
        lines.append(against_goal(f"cardfit {' '.join(args[:4])} …", cpu, DEPLOY_CPU_GOAL_S, "s CPU"))
    if "--no-web" in sys.argv:
        lines.append(f"  web every-card plan at {WEB_CLIENTS} clients: not measured (--no-web)")
        return lines
    p50, p99, n, errors, cpu_ms = web_every_card()
    lines.append(against_goal(f"web every-card plan (uncached), {WEB_CLIENTS} clients, p99 of {n}, "
                              f"{errors} errors", p99, WEB_P99_GOAL_MS, "ms"))
    cpu = "" if cpu_ms is None else (f"; server CPU {cpu_ms:.1f} ms a request, x {WEB_CLIENTS} clients = "
                                     f"{cpu_ms * WEB_CLIENTS:.0f} ms: about the p50 on one idle CPU")
    lines.append(f"    (p50 {p50:.0f} ms{cpu})")
    workers = min(os.cpu_count() or 1, 4)
    if workers > 1:  # `cardfit serve --workers N`: N answers computed at once
        p50, p99, n, errors, cpu_ms = web_every_card(workers)
        lines.append(against_goal(f"  the same on `cardfit serve --workers {workers}`, p99 of {n}, "
                                  f"{errors} errors", p99, WEB_P99_GOAL_MS, "ms"))
        cpu = "" if cpu_ms is None else f"; server CPU {cpu_ms:.1f} ms a request"
        lines.append(f"    (p50 {p50:.0f} ms{cpu}; {os.cpu_count()} CPUs, shared with the clients)")
    return lines


def main() -> None:
    # time what an installed wheel runs: compiled bytecode (PYTHONDONTWRITEBYTECODE would otherwise make every
    # run compile each changed module again)
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(__file__).resolve().parents[1] / "src")],
                   capture_output=True)
    one, one_cpu = cold_start_cpu(["plan", "llama3.1:8b", "--gpu", "RTX 4090", "--json"], runs=15)
    text, text_cpu = cold_start_cpu(["plan", "llama3.1:8b", "--gpu", "RTX 4090"], runs=15)
    base = cold_start(["--version"])
    plan = cold_start(["plan", "llama3.1:8b"])
    plan70 = cold_start(["plan", "meta-llama/Llama-3.3-70B-Instruct", "--quant", "fp8", "--context", "32768",
                         "--runtime", "vllm"])
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    python = time.perf_counter() - t
    print(f"python start-up             {python * 1000:7.0f} ms")
    print(f"cardfit --version           {base * 1000:7.0f} ms")
    print(f"cardfit plan llama3.1:8b --gpu 'RTX 4090' --json  p50 {one * 1000:5.0f} ms, "
          f"CPU {one_cpu * 1000:.0f} ms ({versus(one)})")
    print(f"cardfit plan llama3.1:8b --gpu 'RTX 4090'         p50 {text * 1000:5.0f} ms, "
          f"CPU {text_cpu * 1000:.0f} ms ({versus(text)})")
    print(goal_line(text, text_cpu, one, one_cpu))
    print(f"cardfit plan llama3.1:8b    {plan * 1000:7.0f} ms  ({plan / 0.5:.2f} of the 0.5 s budget)")
    print(f"cardfit plan 70B fp8 vllm   {plan70 * 1000:7.0f} ms  ({plan70 / 0.5:.2f} of the 0.5 s budget)")
    if "--against" in sys.argv:
        name, rev = PREVIOUS_RELEASE
        for line in side_by_side(rev):
            print(line.replace(f"{rev} ", f"{name} ({rev}) ", 1))
    n, secs, cpu, verdicts = sweep()
    print(f"sweep: {n:,} model×quant×GPU×context fits in {secs * 1000:.0f} ms ({secs:.2f} of the 1 s "
          f"budget), {cpu * 1000:.0f} ms CPU: "
          + ", ".join(f"{c:,} {v}" for v, c in sorted(verdicts.items())))
    p50, cpu, report = deploy_search()
    b = report["best"]
    print(f"deploy search, {DEPLOY_QUESTION['model']} at {DEPLOY_QUESTION['requests_per_s']:g} requests/s "
          f"over the whole catalog: {report['searched']['settings']} runtime×quant×KV settings, "
          f"{report['searched']['fitting_shapes']:,} card sets that fit, p50 {p50 * 1000:.0f} ms wall "
          f"({p50:.2f} of the 1 s budget), {cpu * 1000:.0f} ms CPU")
    if b:
        print(f"  best: {b['count']}× {b['gpu']} {b['runtime']} {b['quant']} KV {b['kv_dtype']}, "
              f"${b['monthly_usd']:,.0f}/month, TTFT {b['ttft_ms']:,.0f} ms, TPOT {b['tpot_ms']:,.1f} ms")
        print(f"  {b['command']}")
    for line in goals(text_cpu):
        print(line)


if __name__ == "__main__":
    main()
