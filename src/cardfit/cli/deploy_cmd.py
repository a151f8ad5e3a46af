"""`cardfit deploy`: the cheapest deployment that serves a load within its latency targets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import command
from .console import escape

if TYPE_CHECKING:
    from ..services.deploy import Deployment, DeployReport, Workload

DEPLOY_EPILOG = """\b
Examples:
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 64 --ttft-ms 2000 --tpot-ms 50
  cardfit deploy meta-llama/Llama-3.1-70B-Instruct --requests-per-s 2 --input-tokens 2000 --output-tokens 500
  cardfit deploy qwen3:30b-a3b --users 8 --gpu "RTX 4090" --gpu "RTX 5090" --runtime llama.cpp
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 200 --runtime vllm --budget-usd-month 2000 --json
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --requests-per-s 10 --plot pareto.png
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 64 --runtime vllm --emit k8s > vllm.yaml
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 32 --shared-prefix-tokens 800
  cardfit deploy meta-llama/Llama-3.1-70B-Instruct --requests-per-s 5 --turns 10 --sessions 3000 \
    --input-tokens 2000 --output-tokens 500 --runtime vllm --kv-offload-gb 1000
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --cards 8 --gpu H100
  cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 16 --runtime vllm --speculative eagle3
"""


@command("deploy", epilog=DEPLOY_EPILOG)
def deploy(result: DeployReport, inp: Any) -> None:
    """The cheapest way to serve MODEL to a load within latency targets: card, count, tensor/pipeline split,
    replicas, runtime, quantization and KV cache type, with $/month, $ per million tokens, headroom, the
    break-even against API tiers, the Pareto front and the command that starts it.

    Every candidate is sized by the same memory model as `cardfit plan` (with its error bar), then timed:
    continuous batching with chunked prefill on cardfit's decode step, and queueing for the first token.

    With --emit compose|k8s it prints that deployment as a compose.yaml or Kubernetes manifests instead,
    running the same command. When nothing meets the targets within the limits, it says why (the target
    that fails first and the closest deployment, a target out of reach, or the limit no set fits) and exits
    with status 3.
    """
    if result.emit is not None:
        from . import echo

        echo(result.emit.text.rstrip("\n"))
        return
    _print(result)


def _load(w: Workload) -> str:
    if w.users is not None:
        load = f"{w.users:,g} users" + (f" (the most {w.cards} cards serve)" if w.cards_found_users else "")
    elif w.requests_per_s is not None:
        load = f"{w.requests_per_s:,g} requests/s"
    else:
        load = f"no load given: the most users {w.cards or 0} cards serve"
    if w.cards:
        load += f" · exactly {w.cards} cards"
    reuse = f" ({w.shared_prefix_tokens:,} shared)" if w.shared_prefix_tokens else ""
    if w.shared_prefix_tokens and w.prefix_groups > 1:
        reuse = f" ({w.shared_prefix_tokens:,} shared by one of {w.prefix_groups:,} prefix groups)"
    if w.turns > 1:
        reuse += f" a turn, {w.turns} turns a session (mean prompt {w.prompt_tokens_mean:,} with the history)"
    return (f"{load} · {w.input_tokens:,} prompt{reuse} + {w.output_tokens:,} answer tokens · targets: "
            f"TTFT p90 ≤ {w.ttft_ms:,g} ms, TPOT ≤ {w.tpot_ms:,g} ms ({w.tokens_per_s_per_user:,g} "
            "tok/s per user)")


def _runtime(d: Any) -> str:
    """The runtime with the release planned: "vllm 0.24.0" (the current one), "vllm@0.6.3" (as asked)."""
    from .render import runtime_label

    return runtime_label(d.runtime, d.release)


def _shape(d: Deployment) -> str:
    if d.disaggregated:  # prefill and decode workers (core/disagg.py)
        pre, dec = d.disaggregated["prefill"], d.disaggregated["decode"]
        if _worker(pre) != _worker(dec):  # each pool its own split (pinned, or the search's prefill workers
            # on fewer cards): web/static/app.js shape() words it the same
            return (f"{d.count}× {escape(d.gpu)} ({_workers(pre['replicas'], 'prefill')}{_worker(pre)} + "
                    f"{_workers(dec['replicas'], 'decode')}{_worker(dec)})")
        # one split both pools: its name once, "TP 4" or "attention DP 4 · EP 4" (not "TP 4" for the latter)
        each = f", {_worker(dec).removeprefix(' of ')} each" if _worker(dec) else ""
        return (f"{d.count}× {escape(d.gpu)} ({pre['replicas']} prefill + {dec['replicas']} decode "
                f"workers{each})")
    group = d.tp // d.dp if d.ep > 1 else d.tp  # one attention group's tensor-parallel ranks
    parts = [f"TP {group}"] if group > 1 else []
    if d.ep > 1:
        parts.append(f"attention DP {d.dp} · EP {d.ep}")
    if d.pp > 1:
        parts.append(f"PP {d.pp}" if d.tp > 1 or d.nodes > d.replicas else f"layers over {d.pp}")
    if d.replicas > 1:
        parts.append(f"{d.replicas} replicas")
    return f"{d.count}× {escape(d.gpu)}" + (f" ({' × '.join(parts)})" if parts else "")


def _workers(n: int, role: str) -> str:
    return f"{n} {role} worker" + ("" if n == 1 else "s")


def _worker(pool: dict[str, Any]) -> str:
    """One worker of a disaggregated pool: " of TP 4", " of attention DP 8 · EP 8" ("" for one card)."""
    if pool.get("ep", 1) > 1:
        return f" of attention DP {pool['dp']} · EP {pool['ep']}"
    return f" of TP {pool['tp']}" if pool["tp"] > 1 else ""


def _print(r: DeployReport) -> None:
    """The answer as text, through cli/console.py (plain where rich would write no escape codes, else rich
    itself): a pipe's answer without importing rich."""
    from ..services.deploy import NO_ANSWER
    from ..units import fmt_num  # money as the page's num() rounds it (halves away from zero)
    from .console import Table
    from .render import plan_console

    c = plan_console()
    c.print(f"[bold]{escape(r.model)}[/] · {_load(r.workload)}")
    b = r.best
    if b is not None:
        if b.monthly_usd is None:  # a card the catalog has no rental price for: no cost to rank by
            c.print(f"Fewest cards that meet every target: [bold]{_shape(b)}[/] · {_runtime(b)} · "
                    f"{b.quant} · KV {b.kv_dtype} · no rental price in the catalog for {escape(b.gpu)} "
                    "(--catalog adds one)")
        else:
            c.print(f"Cheapest that meets every target: [bold]{_shape(b)}[/] · {_runtime(b)} · {b.quant} · "
                    f"KV {b.kv_dtype} · [bold]${fmt_num(b.monthly_usd)}/month[/] ({r.hours_per_month:g} h), "
                    f"${fmt_num(b.cost_per_million_usd or 0, 3)} per M output tokens at this load")
        if b.speculative:
            from ..services.speculative import drafted

            sp = b.speculative
            c.print(f"  speculative decoding: {sp['method']}, {drafted(sp)} at "
                    f"acceptance {sp['acceptance']:g} ({sp['tokens_per_step']:g} tokens a step)")
        c.print(f"  TTFT p90 {b.ttft_ms or 0:,.0f} ms · TPOT {b.tpot_ms or 0:,.1f} ms "
                f"({b.per_user_tokens_per_s:,.1f} tok/s per user) · {b.aggregate_tokens_per_s:,.0f} "
                f"tok/s served · headroom {r.headroom or 0:,.2f}× the traffic before a target breaks")
        if b.prefix_hit_rate or b.kv_offload_gb:
            tier = f", with a {b.kv_offload_gb:,g} GB host KV tier per replica" if b.kv_offload_gb else ""
            c.print(f"  prefix cache: {b.prefix_hit_rate:.0%} of the prompt tokens found cached, not "
                    f"prefilled{tier}")
        if b.likely:
            # a deployment using production features: the widest of its runtime's and those features' errors
            feats = ", ".join(b.likely_features or ())
            wider = f", widened to that of its {feats} records" if feats else ""
            c.print(f"  likely {_likely(b.likely)} (10th-90th percentile of cardfit's out-of-sample serving "
                    f"error{escape(wider)}; the targets hold at the pessimistic end)")
        if b.command:
            _print_command(c, b.command)
        if b.dynamo_command:  # the two pools under NVIDIA Dynamo instead
            c.print("  or under NVIDIA Dynamo (its frontend, then one worker per role):")
            _print_command(c, b.dynamo_command)
        apis = "; ".join(f"{a.name} ${a.api_monthly_usd:,.0f}/month"
                         + (" (rent wins)" if a.rent_cheaper else "") for a in r.apis)
        c.print(f"  The same traffic from an API: {apis}")
    else:
        f, near = r.failing, r.closest
        if f is not None and f.target in ("ttft_ms", "tpot_ms") and (f.text or "").startswith("tight"):
            what = "TTFT p90" if f.target == "ttft_ms" else "TPOT"
            c.print(f"[red]Nothing meets the targets safely.[/] The closest is [bold]tight[/]: it meets them "
                    f"as predicted, but its likely {what} reaches {f.achieved or 0:,.1f} ms against "
                    f"{f.limit or 0:,g} ms ({f.ratio or 0:.2f}×)")
        elif f is not None and f.target in ("ttft_ms", "tpot_ms"):
            what = "TTFT p90" if f.target == "ttft_ms" else "TPOT"
            c.print(f"[red]Nothing meets the targets.[/] {what} fails first: {f.achieved or 0:,.1f} ms "
                    f"against {f.limit or 0:,g} ms ({f.ratio or 0:.2f}×) on the closest deployment")
            if f.text:
                c.print(f"  {escape(f.text)}")
        elif f is not None:
            head = NO_ANSWER.get(f.target, "nothing meets the targets")
            c.print(f"[red]{head[0].upper()}{head[1:]}:[/] {escape(f.text or '')}")
        if near is not None:
            c.print(f"  Closest: {_shape(near)} · {_runtime(near)} · {near.quant} · TTFT p90 "
                    f"{_num(near.ttft_ms)} ms · TPOT {_num(near.tpot_ms)} ms · "
                    + ("no rental price" if near.monthly_usd is None else f"${near.monthly_usd:,.0f}/month"))
    one = b or r.closest
    if one is not None and one.benchmark is not None:
        x = one.benchmark
        tail = (f"TPOT mean {_num(x.tpot_mean_ms)} ms (ITL median {_num(x.itl_median_ms)}) · "
                f"{x.output_tokens_per_s:,.0f} tok/s · {x.requests_per_s:,.2f} req/s · {x.seconds:,.1f} s")
        if x.scheduler is None:  # a stage of arrivals (--requests-per-s), from an empty queue
            c.print(f"  Stage of {x.requests:,} requests arriving from an empty queue: TTFT mean "
                    f"{_num(x.ttft_mean_ms)} ms (p90 {_num(x.ttft_p90_ms)}) · {tail}")
        else:
            # services/deploy.py PD_SCHEDULER: a run on prefill and decode pools
            how = "prefill and decode pools" if x.scheduler == "disaggregated" else f"{x.scheduler} scheduler"
            c.print(f"  Benchmark of {x.requests:,} requests ({how}, the first round sent "
                    f"at once): TTFT mean {_num(x.ttft_mean_ms)} ms (median {_num(x.ttft_median_ms)}) · "
                    f"{tail}")
    if r.pareto and b is not None:
        t = Table(header_style="bold", title="Pareto front: rent vs per-user speed vs TTFT")
        for col, just in (("deployment", "left"), ("runtime", "left"), ("quant", "left"), ("KV", "left"),
                          ("$/month", "right"), ("$/M", "right"), ("TTFT ms", "right"), ("TPOT ms", "right"),
                          ("tok/s/user", "right")):
            t.add_column(col, justify=just)
        for d in r.pareto:
            t.add_row(_shape(d), d.runtime, d.quant.split(" (")[0], d.kv_dtype,
                      "—" if d.monthly_usd is None else f"{d.monthly_usd:,.0f}",
                      "—" if d.cost_per_million_usd is None else f"{d.cost_per_million_usd:,.3f}",
                      _num(d.ttft_ms), _num(d.tpot_ms), f"{d.per_user_tokens_per_s:,.1f}")
        c.print(t)
    pd = r.disaggregation
    if pd is not None and _pd_said(r):  # why P/D won or lost (--json and the web page give it either way)
        c.print(f"Prefill and decode {'apart' if pd.winner == 'disaggregated' else 'together'}: "
                f"{escape(pd.why)}")
    for note in r.notes:
        c.print(f"[dim]note: {escape(note)}[/]")
    if r.plot:
        c.print(f"Chart written to {escape(r.plot)}")
    c.flush()


def _pd_said(r: DeployReport) -> bool:
    """Whether the text says why prefill and decode go apart or stay together: where they go apart, where no
    deployment meets the targets, and where a split of prefill and decode workers came within reach: it
    meets the targets for the aggregated answer's rent (a tie), or meets them only as predicted for no more
    than it (disaggregation.predicted_monthly_usd). On a deploy whose disaggregated deployment costs more,
    or none comes near, the line would be noise on every answer: --json and the web page still give it.
    With --cards N and no load it says either way how many users each serves (disaggregation.users)."""
    pd = r.disaggregation
    if pd is None:
        return False
    if pd.winner == "disaggregated" or r.best is None or pd.users is not None:
        return True
    rent = r.best.monthly_usd
    if rent is None:
        return False
    apart = pd.deployment.monthly_usd if pd.deployment is not None else pd.predicted_monthly_usd
    return apart is not None and apart <= rent


def _likely(r: dict) -> str:
    parts = []
    for key, name, unit in (("ttft_ms", "TTFT p90", "ms"), ("tpot_ms", "TPOT", "ms"),
                            ("aggregate_tokens_per_s", "served", "tok/s")):
        lo_hi = r.get(key)
        if lo_hi:
            parts.append(f"{name} {_num(lo_hi[0])}–{_num(lo_hi[1])} {unit}")
    return " · ".join(parts)
def _print_command(c: Any, command: str) -> None:
    """The launch command as the shell reads it: each of its lines whole, never broken at the terminal's
    width (a line break pasted into a shell ends the command: the flags after it would run as a second
    one), and its text as written (no rich markup read into a model name or a flag)."""
    from .console import Verbatim

    for i, line in enumerate(command.split("\n")):
        c.print(Verbatim(("  " if i == 0 else "") + line, style="bold"))


def _num(x: float | None) -> str:
    return "∞" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"
