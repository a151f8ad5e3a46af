"""Text rendering for people. Only imported when a table is printed; rich is imported only where it prints
(`cardfit plan` prints through cli/console.py, whose plain writer answers a pipe without rich)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..units import fmt_bytes, fmt_rate, fmt_tokens, fmt_usd
from .console import Console as PlanConsole
from .console import Table, escape

if TYPE_CHECKING:
    from rich.console import Console

    from ..services.plan import GpuPlan, MemoryView

VERDICT_STYLE = {"fits": "green", "tight": "yellow", "offload": "magenta", "no": "red"}


def width() -> int | None:
    """A terminal's own width (None: rich finds it); 120 columns (or $COLUMNS, when it is a number) when the
    output goes to a pipe or file."""
    import os
    import sys

    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() else 120  # as rich reads $COLUMNS: digits, else ignored


def console() -> Console:
    """rich's console at `width()`."""
    from rich.console import Console

    # no emoji codes: ":name:" in a model tag is text (and the 5 ms table of codes stays unloaded)
    return Console(highlight=False, soft_wrap=False, width=width(), emoji=False)


def plan_console() -> PlanConsole:
    """The console `cardfit plan` and `cardfit deploy` print to at `width()`: plain or rich
    (cli/console.py); call flush()."""
    return PlanConsole(width())


def verdict_text(v: str) -> str:
    return f"[{VERDICT_STYLE.get(v, 'white')}]{v}[/]"


def memory_table(mem: MemoryView, unit: str) -> Table:
    t = Table(header_style="bold")
    t.add_column("memory")
    t.add_column(unit, justify="right")
    t.add_column("likely range", justify="right", style="dim")
    t.add_column("how", style="dim")
    rows = [
        ("weights", mem.weights_bytes, mem.weights_bytes_range,
         f"{mem.bits_per_weight} bits/weight ({mem.weights_method})" + (
             f"; token embedding {fmt_bytes(mem.host_weights_bytes, unit)} kept in system RAM"
             if mem.host_weights_bytes else "")),
        ("KV cache", mem.kv_cache_bytes, mem.kv_cache_bytes_range, _kv_how(mem)),
        ("runtime overhead", mem.overhead_bytes, mem.overhead_bytes_range,
         "none on Apple's unified memory: Metal's buffers are the weights, cache and workspace"
         if mem.unified_memory else "CUDA context, framework, graphs"),
        ("activations", mem.activation_bytes, mem.activation_bytes_range, "prefill workspace"),
    ]
    if mem.draft_bytes:  # --speculative: the drafter's weights and its KV cache
        rows.append(("speculative drafter", mem.draft_bytes, None, "weights and KV cache (--speculative)"))
    for name, b, r, how in rows:
        t.add_row(name, fmt_bytes(b, unit).rsplit(" ", 1)[0], range_text(r, unit), how)
    t.add_row("[bold]total[/]", f"[bold]{fmt_bytes(mem.total_bytes, unit).rsplit(' ', 1)[0]}[/]",
              range_text(mem.total_bytes_range, unit), "range: validation errors (cardfit validate)")
    return t


def range_text(r: list | None, unit: str) -> str:
    """'4.9–5.0' for a [low, high] byte range from core/uncertainty.py; blank when unknown or exact."""
    if not r:
        return ""
    if r[0] == r[1]:
        return "exact"
    lo, hi = (fmt_bytes(x, unit).rsplit(" ", 1)[0] for x in r)
    return f"{lo}–{hi}"


def _kv_how(mem: MemoryView) -> str:
    if not mem.kv_bytes_per_token and not mem.kv_cache_bytes:  # an encoder (embedding, reranker)
        return "none: the model reads each input whole and keeps no cache between tokens"
    tokens = mem.context * mem.sequences
    how = f"{mem.kv_bytes_per_token:,} B/token × {fmt_tokens(mem.context)} × {mem.sequences}"
    if tokens and abs(mem.kv_bytes_per_token * tokens - mem.kv_cache_bytes) > 0.01 * mem.kv_cache_bytes:
        how = (f"≈{mem.kv_cache_bytes / tokens:,.0f} B/token on average × {fmt_tokens(mem.context)} × "
               f"{mem.sequences} (sliding-window or fixed-state layers; full layers "
               f"{mem.kv_bytes_per_token:,})")
    return how


def _rate(r: GpuPlan) -> str:
    """Realistic tokens/s; '≤ ceiling' where the runtime has no calibrated figure; '—' where it cannot run."""
    if r.verdict == "no":
        return "—"
    if r.decode_tokens_per_s is not None:
        return fmt_rate(r.decode_tokens_per_s)
    return f"≤{fmt_rate(r.decode_ceiling_tokens_per_s)}" if r.decode_ceiling_tokens_per_s else "—"


def gpu_table(rows: tuple[GpuPlan, ...], unit: str, limit: int) -> Table:
    """Ranked cards; a context column appears when the runtime picks a different context per card (Ollama)."""
    t = Table(header_style="bold")
    per_card_context = len({r.context for r in rows[:limit]}) > 1
    cols = [("#", "right"), ("GPU", "left"), ("cards", "right"), (f"usable {unit}", "right"),
            (f"free {unit}", "right"), ("verdict", "left"), ("$/month", "right"), ("tok/s", "right")]
    if per_card_context:
        cols.insert(3, ("context", "right"))
    for col, just in cols:
        t.add_column(col, justify=just)
    for i, r in enumerate(rows[:limit], 1):
        cards = str(r.count) if r.nodes == 1 else f"{r.count} ({r.nodes} nodes)"
        verdict = verdict_text(r.verdict)
        if r.verdict == "offload":
            verdict += f" {r.gpu_layer_fraction or 0:.0%} GPU"
        cells = [str(i), escape(r.gpu), cards, fmt_bytes(r.usable_bytes, unit).rsplit(" ", 1)[0],
                 fmt_bytes(r.free_bytes, unit).rsplit(" ", 1)[0], verdict, fmt_usd(r.monthly_usd), _rate(r)]
        if per_card_context:
            cells.insert(3, fmt_tokens(r.context))
        t.add_row(*cells)
    return t


def runtime_label(runtime: str, release: str | None) -> str:
    """A runtime as the text output names it: with the release timed ("vllm 0.24.0", the current one), or as
    asked ("vllm@0.6.3", which carries its release)."""
    return runtime if "@" in runtime or not release else f"{runtime} {release}"
