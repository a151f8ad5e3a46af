"""`cardfit speed`: decode throughput and per-user speed against concurrency, prefill and cold start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import command
from .console import escape

if TYPE_CHECKING:
    from ..services.speed import SpeedReport

SPEED_EPILOG = """\b
Examples:
  cardfit speed llama3.1:8b --gpu "RTX 4090"
  cardfit speed meta-llama/Llama-3.1-8B-Instruct --quant fp8 --gpu H100 --context 4096 \
--concurrency 1,16,64,256
  cardfit speed shape-7b --quant bf16 --gpu A40 --filled 0          # the rental guide: ceiling 49.7 tokens/s
  cardfit speed qwen3.5:27b --gpu "RTX 4080" --context 131072 --ram-bandwidth 51.2   # CPU offload
  cardfit speed llama-3.1-70b --quant fp8 --gpu H100 --gpus 2 --plot speed.png --json
  cardfit speed llama-3.1-70b --quant fp8 --gpu H100 --gpus 2 --runtime vllm --input-tokens 2000 \
--output-tokens 500 --turns 10 --sessions 100 --kv-offload-gb 400   # chat histories, a host KV tier
  cardfit speed llama-3.1-8b --gpu H100 --runtime vllm --speculative eagle3 --concurrency 1,16,64,256
  cardfit speed llama-3.1-8b --gpu H100 --runtime vllm@0.10.1 --quant fp8 --input-tokens 1000 \
--output-tokens 200 --max-num-seqs 64 --concurrency 16,64,256   # the users past 64 queue, as in deploy
"""


@command("speed", epilog=SPEED_EPILOG)
def speed(result: SpeedReport, inp: Any) -> None:
    """How fast MODEL decodes on a card: the bandwidth ceiling, a realistic single-stream figure, and
    aggregate vs per-user tokens/s as concurrent sequences grow until compute or the KV cache runs out.

    Decode reads the weights once per step (MoE: the experts the batch touches) plus each sequence's KV
    cache; prefill is 2 × active parameters FLOPs per token against the card's dense TFLOPS.
    """
    _print(result)


def _print(r: SpeedReport) -> None:
    from rich.table import Table

    from .render import console, runtime_label

    c = console()
    tp_note = f" (tensor parallel {r.tp})" if r.tp > 1 else ""
    runtime = runtime_label(r.runtime, r.release)
    c.print(f"[bold]{escape(r.model)}[/] · {r.quant} · {runtime} · {r.count}× {escape(r.gpu)}"
            f"{tp_note} · context {r.context:,}"
            f" · {r.filled:,} tokens filled · KV {r.kv_dtype}")
    if r.verdict == "offload":
        c.print(f"CPU offload: {r.processor} (as `ollama ps` shows it); the weights in system RAM (whole "
                f"layers, or a MoE model's routed experts first on llama.cpp with --fit) are read at "
                f"{r.calibration.ram_bandwidth_gbps} GB/s")
    est = f", about {r.decode_tokens_per_s:,.1f} realistic" if r.decode_tokens_per_s else ""
    gb = r.bytes_per_token / 1e9
    if r.cpu_bytes_per_token:
        why = (f"{gb - r.cpu_bytes_per_token / 1e9:.2f} GB per token at {r.bandwidth_gbps:,g} GB/s, "
               f"{r.cpu_bytes_per_token / 1e9:.2f} GB from system RAM")
    else:
        tp = r.tp or 1
        bw = (
            f"{tp} × {r.bandwidth_gbps:,g} GB/s (tensor parallel)"
            if tp > 1
            else f"{r.bandwidth_gbps:,g} GB/s"
        )
        why = f"{bw} ÷ {gb:.2f} GB per token"
    c.print(f"Decode: ceiling {r.decode_ceiling_tokens_per_s:,.1f} tokens/s per stream ({why}){est}.")
    if r.prefill_tokens_per_s:
        c.print(f"Prefill: about {r.prefill_tokens_per_s:,} tokens/s; first token of a "
                f"{r.prompt_tokens:,}-token prompt after {r.time_to_first_token_s:.2f} s. Cold start: "
                f"{r.cold_start_s:,.1f} s from disk.")
    if r.verdict != "offload":
        c.print(f"KV cache room: {r.max_concurrency:,} sequence{'' if r.max_concurrency == 1 else 's'} of "
                f"{r.context:,} tokens"
                + (f"; compute bound from {r.compute_bound_from:,} sequences"
                   if r.compute_bound_from else ""))
    ttft = any(row.ttft_ms is not None for row in r.rows)  # a served load: its time to first token too
    t = Table(title="Served load vs concurrent users" if ttft else "Decode vs concurrency")
    cols = ["sequences", "aggregate tok/s", "per user tok/s", "step ms"]
    cols += ["TTFT ms", "TTFT p90 ms"] if ttft else []
    reused = any(row.prefix_hit_rate for row in r.rows)  # --shared-prefix-tokens / --turns
    cols += ["prompt cached"] if reused else []
    for col in (*cols, "bound", "KV fits"):
        t.add_column(col, justify="right")
    for row in r.rows:
        cells = [f"{row.concurrency:,}", f"{row.aggregate_tokens_per_s:,.1f}",
                 f"{row.per_user_tokens_per_s:,.2f}", f"{row.step_ms:,.2f}"]
        if ttft:
            cells += [f"{row.ttft_ms or 0:,.1f}", f"{row.ttft_p90_ms or 0:,.1f}"]
        if reused:
            cells.append(f"{row.prefix_hit_rate:.0%}")
        t.add_row(*cells, row.bound, "yes" if row.kv_fits else "no")
    c.print(t)
    for note in r.notes:
        c.print(f"[dim]note: {escape(note)}[/]")
    if r.plot:
        c.print(f"Chart written to {r.plot}")
