"""`cardfit plan` and `cardfit max-context`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import command, echo
from .console import escape
from .options import top_option, unit_option

if TYPE_CHECKING:
    from ..services.plan import CostView, PlanView
    from ..services.reverse import LargestModels, MaxContext, MaxSequences

PLAN_EPILOG = """\b
Examples:
  cardfit plan llama3.1:8b                       # Ollama tag: Q4_K_M, Ollama's default context per card
  cardfit plan qwen2.5:14b --gpu "RTX 4060 Ti" --context 16384
  cardfit plan meta-llama/Llama-3.3-70B-Instruct --quant fp8 --context 32768 --runtime vllm
  cardfit plan llama-3.1-405b --quant int4 --context 8192 --json
  cardfit plan --params 70e9 --layers 80 --kv-heads 8 --head-dim 128 --quant fp8 --context 8192
  cardfit plan llama-3.1-8b --gpu "RTX 4090" --runtime llama.cpp --quant Q8_0 --speculative draft:llama-3.2-1b
"""


def kv_words(kv_dtype: str, kv_bytes_per_token: int) -> str:
    """The cache type, or that there is none (an encoder such as nomic-embed-text attends within one pass and
    keeps no cache; a decoder-based embedding model such as Qwen3 Embedding does keep one)."""
    return f"KV {kv_dtype}" if kv_bytes_per_token else "no KV cache"


@command("plan", epilog=PLAN_EPILOG, display=(top_option(12), unit_option()))
def plan(p: Any, inp: Any, unit: str, top: int) -> None:
    """Does MODEL fit, on which cards, how fast and at what cost.

    MODEL is a catalog name (Ollama tag, Hugging Face id or short alias), a path to a config.json, model
    folder, .gguf or .safetensors file; or leave it out and give the shape with --params, --layers,
    --kv-heads and --head-dim.
    """
    _print_plan(p.view(), unit, top)


def _print_plan(r: PlanView, unit: str, top: int) -> None:
    from ..units import fmt_bytes, fmt_tokens
    from .render import gpu_table, memory_table, plan_console

    c = plan_console()
    m, i = r.model, r.inputs
    tag = f" ({m.ollama_tag})" if m.ollama_tag else ""
    release = f" {i.release}" if i.release else ""
    c.print(f"[bold]{escape(m.name)}[/]{tag} · {i.quant} · runtime {i.runtime}{release} · context "
            f"{fmt_tokens(i.context)} ({i.context_source}) · {i.batch:,} "
            f"sequence{'s' if i.batch != 1 else ''} · "
            + kv_words(i.kv_dtype, r.memory.kv_bytes_per_token))
    c.print(memory_table(r.memory, unit))
    c.print()
    c.print(gpu_table(r.gpus, unit, top))
    if len(r.gpus) == 1 or r.gpus[0].verdict == "no":
        for g in r.gpus[:3]:
            if g.verdict in ("no", "offload") and g.reason:
                c.print(f"{escape(g.gpu)}: {escape(g.reason)}")
    best = r.gpus[0]
    if best.verdict in ("fits", "tight"):
        c.print(f"\nBest: {best.count}× {escape(best.gpu)} — {best.verdict}, "
                f"{fmt_bytes(best.free_bytes, unit)} free")
    a = r.answers
    if len(r.gpus) > 1 and (a.smallest_card or a.cheapest_set):
        c.print("; ".join(x for x in (a.cheapest_card and f"cheapest card that fits: {a.cheapest_card}",
                                      a.smallest_card and f"smallest: {a.smallest_card}",
                                      a.cheapest_set and f"cheapest set: {a.cheapest_set}") if x))
    if a.smallest_card_by_headroom:
        c.print(f"Smallest card holding {i.headroom:g}× the weights (a rule of thumb): "
                f"{a.smallest_card_by_headroom}")
    s = r.speed
    if s.decode_ceiling_tokens_per_s and r.gpus[0].verdict != "no":
        span = _likely(s.decode_tokens_per_s_range, "{:,.0f}")
        est = f", about {s.decode_tokens_per_s:,.0f} realistic{span}" if s.decode_tokens_per_s else ""
        c.print(f"Decode on {escape(s.gpu)}: ceiling {s.decode_ceiling_tokens_per_s:,.0f} tokens/s per "
                f"stream{est}.")
    _print_cost(c, r.cost)
    for note in r.notes:
        c.print(f"[dim]note: {escape(note)}[/]")
    c.print(f"[dim]Sizes in {unit} ({'10^9' if unit == 'GB' else '2^30'} bytes); cards by usable bytes as "
            "the driver reports them.[/]")
    c.flush()


def _likely(rng: Any, fmt: str) -> str:
    """' (likely LOW–HIGH)', or nothing where the two ends print alike ('likely 2–2' says nothing)."""
    if not rng:
        return ""
    lo, hi = fmt.format(rng[0]), fmt.format(rng[1])
    return "" if lo == hi else f" (likely {lo}–{hi.lstrip('$')})"


def _print_cost(c: Any, cost: CostView) -> None:
    from ..units import fmt_num

    if not cost.cards:
        return
    k = cost.cards[0]
    names = {a.id: (a.name, a.price_per_million_usd) for a in cost.apis}
    parts = []
    for b in k.breakeven:
        name, price = names.get(b.api, (b.api, None))
        label = f"{name} (${price:g}/M)" if price is not None else name
        if b.breaks_even:
            parts.append(f"beats {label} above {b.breakeven_millions_per_month or 0:,.0f} M tokens/month "
                         f"({b.required_duty or 0:.0%} duty)")
        else:
            parts.append(f"never beats {label}")
    rng = k.ranges.cost_per_million_usd_range if k.ranges else None
    # the page prints this line from the same figures (app.js costLine): fmt_num rounds as its num() does
    c.print(f"Cost on {k.count}× {escape(k.gpu)}: ${fmt_num(k.monthly_usd or 0)}/month "
            f"(${fmt_num(k.hourly_usd or 0, 2)}/h over {cost.hours_per_month:g} h); at "
            f"{fmt_num(k.tokens_per_s or 0, 1)} tokens/s "
            f"({cost.tokens_per_s_basis.split(' (')[0]}) ${fmt_num(k.cost_per_million_usd or 0, 2)}"
            + _likely(rng, "${:,.2f}") + " per M at "
            f"{cost.duty:.0%} duty; " + "; ".join(parts) + ".")
    if cost.input_per_output:
        c.print(f"API $/M: output price + {cost.input_per_output:g} prompt tokens billed per output token "
                f"({cost.input_per_output_source}).")


MAXCTX_EPILOG = """\b
Examples:
  cardfit max-context llama3.1:8b --gpu "RTX 4090"
  cardfit max-context meta-llama/Llama-3.1-70B-Instruct --gpu H200 --quant fp8 --runtime vllm
  cardfit max-context qwen2.5:14b --gpu "RTX 4060 Ti" --kv-dtype q8_0 --json
"""


@command("max-context", epilog=MAXCTX_EPILOG, skip=("context",))
def max_context(result: MaxContext, inp: Any) -> None:
    """The longest context per sequence that fits MODEL on one card (or --gpus cards)."""
    from ..units import fmt_tokens

    tail = "" if result.limited_by == "memory" else (" (capped by the model's "
                                                     f"{fmt_tokens(result.model_max_context)})")
    seqs = f"{result.batch:,} sequence{'' if result.batch == 1 else 's'}"
    kv = kv_words(result.kv_dtype, result.kv_bytes_per_token)
    echo(f"{result.model} on {result.count}× {result.gpu} ({result.quant}, {result.runtime}, {kv}, {seqs}): "
         f"up to {result.max_context_tokens:,} tokens per sequence{tail}.")


MAXSEQ_EPILOG = """\b
Examples:
  cardfit max-sequences llama-3.1-8b --gpu H100 --context 8192 --runtime vllm
  cardfit max-sequences llama3.1:8b --gpu "RTX 4090" --kv-dtype q8_0 --json
"""


@command("max-sequences", epilog=MAXSEQ_EPILOG, skip=("batch", "parallel"))
def max_sequences(r: MaxSequences, inp: Any) -> None:
    """The most concurrent sequences of --context tokens that fit MODEL on one card (or --gpus cards)."""
    kv = kv_words(r.kv_dtype, r.kv_bytes_per_token)
    echo(f"{r.model} on {r.count}× {r.gpu} ({r.quant}, {r.runtime}, {kv}): up to "
               f"{r.max_sequences:,} concurrent sequence{'' if r.max_sequences == 1 else 's'} of "
               f"{r.context:,} tokens ({r.context_source}).")


LARGEST_EPILOG = """\b
Examples:
  cardfit largest-model --gpu "RTX 4090" --quant Q4_K_M
  cardfit largest-model --gpu H100 --quant fp8 --runtime vllm --context 32768 --json
"""


@command("largest-model", epilog=LARGEST_EPILOG,
         skip=("model", "params", "active_params", "layers", "kv_heads", "head_dim", "hidden", "vocab",
               "hub"))
def largest_model(r: LargestModels, inp: Any) -> None:
    """The largest catalog models that fit --gpu at --quant (default: each model's own) and --context (8K)."""
    if not r.models:
        echo(f"No catalog model fits {r.gpu} with these settings.")
        return
    echo(f"Largest catalog models that fit {r.gpu}:")
    for f in r.models[:10]:
        echo(f"  {f.model:<34} {f.params / 1e9:7.1f}B  {f.quant:<12} {f.runtime:<10} "
                   f"{f.free_bytes / 1e9:6.1f} GB free at {f.context:,} tokens")
