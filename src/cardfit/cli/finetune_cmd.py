"""`cardfit finetune`: fine-tuning memory by term, the three methods side by side, and the cards that hold
it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import command
from .console import escape
from .options import top_option, unit_option

if TYPE_CHECKING:
    from ..services.finetune import Finetune

FINETUNE_EPILOG = """\b
Examples:
  cardfit finetune llama3.1:8b --method qlora
  cardfit finetune meta-llama/Llama-3.1-70B-Instruct --method lora --seq 4096 --targets all
  cardfit finetune llama-3.1-8b --method full --optimizer adamw-8bit --gpu H100 --gpus 4 --zero 2
  cardfit finetune llama-3.1-70b --method full --zero 3 --offload-optimizer --gpu "A100 SXM 80GB" --gpus 8
  cardfit finetune shape-70b --method full --flat-activations --priced --json   # the rental guide's table
"""


@command("finetune", epilog=FINETUNE_EPILOG, display=(top_option(10), unit_option()))
def finetune(result: Finetune, inp: Any, unit: str, top: int) -> None:
    """How much memory fine-tuning MODEL needs (full, LoRA or QLoRA) and which cards or nodes hold it.

    Every term is shown: weights, gradients, FP32 master weights and optimizer state, LoRA adapter,
    activations (from --seq, --batch, the model's widths and checkpointing) and the CUDA context.
    Several cards split the state with ZeRO (default stage 3); --offload-optimizer moves the optimizer
    state to host RAM.
    """
    _print(result, unit, top)


def _print(r: Finetune, unit: str, top: int) -> None:
    from rich.table import Table

    from ..units import fmt_bytes, fmt_usd
    from .render import console, verdict_text

    def gb(n: int) -> str:
        return fmt_bytes(n, unit).rsplit(" ", 1)[0]

    c = console()
    m, i, mem = r.model, r.inputs, r.memory
    c.print(f"[bold]{escape(m.name)}[/] · {i.method} · {i.optimizer} · seq {i.seq:,} × micro-batch {i.batch}"
            f" · checkpointing {'on' if i.checkpointing else 'off'}"
            + (f" · LoRA r{i.rank} on {i.targets}" if i.method != "full" else ""))
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col, just in (("memory", "left"), (unit, "right"), ("how", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for term in mem.terms:
        if term.bytes or term.name in ("weights", "activations"):
            t.add_row(term.name, gb(term.bytes), f"[dim]{term.how}[/]")
    t.add_row("[bold]total[/]", f"[bold]{gb(mem.total_bytes)}[/]", "[dim]one replica, before sharding[/]")
    c.print(t)
    c.print("[dim]The rental guide's flat 15 % for activations and fragmentation would be "
            f"{gb(mem.flat_activation_bytes)} {unit} instead of {gb(mem.activation_bytes)} {unit} "
            "(--flat-activations uses it).[/]")
    c.print()
    cmp = Table(box=None, header_style="bold", pad_edge=False, title=None)
    for col in ("method", f"total {unit}", f"weights {unit}", "trainable params", f"activations {unit}",
                f"guide's rule {unit}"):
        cmp.add_column(col, justify="left" if col == "method" else "right")
    guide = r.seed_rule
    guide_of = {"full": guide.full_with_activations_bytes, "lora": guide.lora_bytes,
                "qlora": guide.qlora_bytes}
    for row in r.methods:
        cmp.add_row(row.method, gb(row.total_bytes), gb(row.weights_bytes), f"{row.trainable_params:,}",
                    gb(row.activation_bytes), gb(guide_of[row.method]))
    c.print(cmp)
    c.print()
    g = Table(box=None, header_style="bold", pad_edge=False)
    for col, just in (("#", "right"), ("GPU", "left"), ("cards", "right"), (f"per card {unit}", "right"),
                      (f"free {unit}", "right"), (f"host RAM {unit}", "right"), ("verdict", "left"),
                      ("$/month", "right")):
        g.add_column(col, justify=just)  # type: ignore[arg-type]
    for n, o in enumerate(r.gpus[:top], 1):
        cards = str(o.count) if o.nodes == 1 else f"{o.count} ({o.nodes} nodes)"
        verdict = verdict_text(o.verdict) + (f" [dim]{o.reason}[/]" if o.reason and o.verdict == "no" else "")
        g.add_row(str(n), escape(o.gpu), cards, gb(o.per_card_bytes), gb(o.free_bytes), gb(o.host_ram_bytes),
                  verdict, fmt_usd(o.monthly_usd))
    c.print(g)
    for note in r.notes:
        c.print(f"[dim]note: {escape(note)}[/]")
    c.print(f"[dim]Sizes in {unit}; cards by usable bytes as the driver reports them; ZeRO stage 3 on "
            "several cards unless --zero is given.[/]")
