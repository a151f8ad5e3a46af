"""`cardfit stack FILE`: several models on one machine, card by card, with what to change and the launch
bundle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import command
from .options import unit_option

if TYPE_CHECKING:
    from ..services.stack import Stack

STACK_EPILOG = """\b
Examples:
  cardfit stack examples/stacks/rag-4090.toml
  cardfit stack examples/stacks/rag-4090.yaml
  cardfit stack examples/stacks/70b-draft-lora-2xh100.toml --json
  cardfit stack examples/stacks/rag-4090.toml --rent
  cardfit stack examples/stacks/llamacpp-3090-3060.toml --bundle compose
  cardfit stack examples/stacks/vision-chat-mac.toml --gpu "M4 Max 128GB"
"""


@command("stack", epilog=STACK_EPILOG, display=(unit_option(),))
def stack(result: Stack, inp: Any, unit: str) -> None:
    """Plan several models on one machine from a TOML FILE ([machine] gpu = [...]; one [[model]] table per
    model: model, role (chat, vision, embed, rerank, draft, adapter), runtime, quant, context, users,
    requests_per_s, resident), or a YAML one (.yaml/.yml, or --format yaml) with the same keys (machine:
    gpu: [...]; model: a list of mappings).

    Each model is sized as `cardfit plan` sizes it; each server adds its own CUDA context, vLLM servers
    get --gpu-memory-utilization shares that sum under 1 on a card, drafts go inside their model's vLLM
    server and LoRA adapters inside its vLLM, SGLang or llama.cpp server (as each engine allocates them),
    and llama.cpp splits a model over unequal cards by their free memory.
    Prints the bytes of every model per card, what to change when the set does not fit (cheapest first)
    and one launch bundle (a shell script, or --bundle compose).
    """
    _print(result, unit, bool(getattr(inp, "rent", False)))


def _print(r: Stack, unit: str, rent: bool = False) -> None:
    from rich.table import Table

    from ..units import fmt_bytes
    from .console import escape
    from .render import console

    def gb(n: int) -> str:
        return fmt_bytes(n, unit)

    c = console()
    c.print(f"[bold]Stack verdict: {r.verdict}[/] ({unit}, decimal)" if unit == "GB"
            else f"[bold]Stack verdict: {r.verdict}[/] ({unit})")
    for i, d in enumerate(r.devices):
        c.print(f"\n[bold]card {i}: {escape(d.gpu)}[/] · {gb(d.usable_bytes)} usable · "
                f"{gb(d.free_bytes)} free · {d.verdict}")
        if not d.entries:
            continue
        t = Table(box=None, header_style="bold", pad_edge=False)
        for col, just in (("model", "left"), ("role", "left"), ("runtime", "left"), ("quant", "left"),
                          ("context", "right"), (unit, "right"), ("tok/s", "right"), ("port", "right")):
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        for e in d.entries:
            speed = "" if e.tokens_per_s is None else f"{e.tokens_per_s:,.0f}" + (
                " read" if e.role in ("embed", "rerank") else "")
            t.add_row(escape(e.model), e.role + ("" if e.resident else " (swap)"), e.runtime, escape(e.quant),
                      f"{e.context:,}", gb(e.bytes).rsplit(" ", 1)[0], speed, str(e.port or ""))
        c.print(t)
    for u in r.unplaced:
        c.print(f"\n[bold]not placed:[/] {escape(u.model)} ({u.role}, {u.runtime}) {gb(u.bytes)}: "
                f"{escape(u.reason)}")
    if r.changes:
        c.print("\n[bold]What to change[/] (cheapest first):")
        for ch in r.changes:
            rent = f" (+${ch.monthly_usd:,.0f}/month)" if ch.monthly_usd else ""
            who = f"{escape(ch.model)}: " if ch.model else ""
            alone = "" if ch.fits else " [dim](helps; not enough alone)[/]"
            c.print(f"  {who}{escape(ch.change)}{rent}{alone}")
    if r.cheapest is not None:
        c.print(f"\n[bold]Cheapest rented machine that holds the set:[/] {r.cheapest.count}× "
                f"{escape(r.cheapest.gpu)}, ${r.cheapest.monthly_usd:,.0f}/month")
    elif rent:
        c.print("\n[bold]No rented machine of 1–8 priced cards of one kind holds the set.[/]")
    for n in r.notes:
        c.print(f"[dim]note: {escape(n)}[/]")
    c.print(f"\n[bold]Launch bundle[/] ({r.bundle.format}):")
    c.print(escape(r.bundle.text.rstrip("\n")), soft_wrap=True)
