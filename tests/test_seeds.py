"""The guides' own worked numbers, recomputed by cardfit (each case names its guide and section): the
GPU Rent Hub VRAM guide (updated 2026-09-01, German and French editions: "the rental guide"), GPUFlow's
Ollama VRAM guide (Hindi, Sept 2026) and Primcast's 'Language models on bare metal' (https://primcast.com/hpc).

The rental guide sizes with
VRAM = parameters × bytes per parameter + KV cache (FP16) + about 2 GB, at 8,192 tokens and batch 1:
cardfit's `rule-of-thumb` runtime is exactly that block. Card choices use the usable bytes the driver
reports, not the marketing GB, which is where cardfit and the guide part ways."""

from __future__ import annotations

import pytest

from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.core.kv import kv_bytes_per_token, kv_cache_bytes
from cardfit.core.weights import weights

from .helpers import plan_of

GB = 1e9
SHAPES = ["shape-7b", "shape-13b", "shape-34b", "shape-70b", "shape-405b"]


def model(mid):
    return default_models().get(mid)


# the GPU Rent Hub guide section 03 table: KV per token (MB) and at 8k / 32k / 128k (GB), FP16 cache, batch 1
KV_TABLE = {
    "shape-7b": (0.13, 1.1, 4.3, 17.2),
    "shape-13b": (0.82, 6.7, 26.8, 107.4),  # the MHA row: 40 KV heads, bigger cache than the 70B
    "shape-34b": (0.25, 2.0, 8.1, 32.2),
    "shape-70b": (0.33, 2.7, 10.7, 42.9),
    "shape-405b": (0.52, 4.2, 16.9, 67.6),
}


@pytest.mark.parametrize("mid", SHAPES)
def test_kv_table_of_the_rental_guide(mid):
    per_token_mb, k8, k32, k128 = KV_TABLE[mid]
    m = model(mid)
    assert round(kv_bytes_per_token(m) / 1e6, 2) == per_token_mb
    assert round(kv_cache_bytes(m, 8192) / GB, 1) == k8
    assert round(kv_cache_bytes(m, 32768) / GB, 1) == k32
    assert round(kv_cache_bytes(m, 131072) / GB, 1) == k128


# the GPU Rent Hub guide section 02 table: totals at 8k, batch 1 (GB): BF16, FP8, INT4
TOTALS = {
    "shape-7b": (17, 10, 7),
    "shape-13b": (35, 22, 15),
    "shape-34b": (72, 38, 21),
    "shape-70b": (145, 75, 40),
    "shape-405b": (816, 411, 209),
}


@pytest.mark.parametrize("mid", SHAPES)
@pytest.mark.parametrize("i,quant", [(0, "bf16"), (1, "fp8"), (2, "int4")])
def test_inference_totals_of_the_rental_guide(mid, i, quant):
    p = plan_of(model=mid, quant=quant, context=8192, runtime="rule-of-thumb", gpu="MI300X", gpus=8)
    assert round(p.first.memory.total_bytes / GB) == TOTALS[mid][i]


def test_worked_example_70b_fp8_of_the_rental_guide():
    """the GPU Rent Hub guide section 01: 70 GB weights + 2.7 GB KV + 2 GB overhead = 75 GB, fits an 80 GB
    card."""
    p = plan_of(model="shape-70b", quant="fp8", context=8192, runtime="rule-of-thumb", gpu="H100 SXM")
    mem = p.first.memory
    assert mem.weights_bytes == 70_000_000_000
    assert round(mem.kv_cache_bytes / GB, 1) == 2.7
    assert mem.overhead_bytes == 2_000_000_000
    assert round(mem.total_bytes / GB) == 75
    # The guide counts "5 GB reserve" on 80 GB; the driver reports 81,559 MiB = 85.5 GB usable.
    assert p.first.option.verdict == "fits"
    assert round(p.first.option.free_bytes / GB, 1) == 10.8


def test_qwen25_14b_q4km_of_the_ollama_guide():
    """GPUFlow's Ollama guide: Qwen 2.5 14B at Q4_K_M is 9.0 GB (Ollama download 9.0 GB); KV 196,608 B/token;
    with the guide's ~1 GB overhead: 10.8 GB at 4K, 13.2 GB at 16K, 16.4 GB at 32K."""
    m = model("qwen2.5-14b")
    assert kv_bytes_per_token(m) == 196_608
    w = weights(m, default_quants().get("Q4_K_M")).total_bytes
    assert abs(w / 9.0e9 - 1) < 0.02
    for ctx, total in ((4096, 10.8), (16384, 13.2), (32768, 16.4)):
        p = plan_of(model="qwen2.5-14b", quant="Q4_K_M", context=ctx, runtime="rule-of-thumb", overhead_gb=1,
                    gpu="RTX 4060 Ti 16GB")
        assert abs(p.first.memory.total_bytes / GB - total) <= 0.15, ctx


def test_kv_per_token_spec():
    """GPUFlow's Ollama guide: Llama 3.1 8B 131,072 B/token; Qwen2.5 7B 57,344; Qwen2.5 14B 196,608 (FP16)."""
    assert kv_bytes_per_token(model("llama-3.1-8b")) == 131_072
    assert kv_bytes_per_token(model("qwen2.5-7b")) == 57_344
    assert kv_bytes_per_token(model("qwen2.5-14b")) == 196_608


# the GPU Rent Hub guide section 05 lookup table: cheapest card (single card first, a set only when none holds
# it)
LOOKUP = [
    # (model, quant, card, count, verdict, monthly) as cardfit answers; comment = the guide's cell
    ("shape-7b", "bf16", "RTX A5000", 1, "fits", 190),      # 17 GB  RTX A5000 $190
    ("shape-7b", "fp8", "L4", 1, "fits", 250),              # 10 GB  L4 $250 (A5000/3090 have no FP8)
    ("shape-7b", "int4", "RTX A5000", 1, "fits", 190),      # 7 GB   RTX A5000 $190
    ("shape-13b", "bf16", "A40", 1, "fits", 240),           # 35 GB  A40 $240
    ("shape-13b", "fp8", "L4", 1, "tight", 250),            # 22 GB  L4 $250, tight
    ("shape-13b", "int4", "RTX A5000", 1, "fits", 190),     # 15 GB  RTX A5000 $190
    ("shape-34b", "bf16", "A100 SXM 80GB", 1, "fits", 990),  # 72 GB  A100 SXM $990
    ("shape-34b", "fp8", "RTX 6000 Ada", 1, "fits", 460),   # 38 GB  RTX 6000 Ada $460
    ("shape-34b", "int4", "RTX A5000", 1, "tight", 190),    # 21 GB  RTX A5000 $190, tight
    ("shape-70b", "bf16", "MI300X", 1, "fits", 1590),       # 145 GB MI300X $1,590
    ("shape-70b", "fp8", "H100 PCIe", 1, "fits", 1490),     # 75 GB  H100 PCIe $1,490
    ("shape-70b", "int4", "A40", 1, "fits", 240),           # 40 GB  A40 $240
    # 816 GB: the guide says 8× MI300X ($11,450) because 4 × 192 GB < 816; the driver reports 205.8 GB per
    # card, so 4 cards hold it with under 2 GB per card to spare: tight, $5,851.
    ("shape-405b", "bf16", "MI300X", 4, "tight", 5851.2),
    # 411 GB: the guide says 8× MI300X ($11,450); by its own rules 4× MI300X ($5,851 with 8 % off) holds it
    # (the guide's 8-card answer is a mistake)
    ("shape-405b", "fp8", "MI300X", 4, "fits", 5851.2),
    ("shape-405b", "int4", "A40", 8, "fits", 1728),         # 209 GB 8× A40 $1,728
]


@pytest.mark.parametrize("mid,quant,card,count,verdict,monthly", LOOKUP)
def test_lookup_table_of_the_rental_guide(mid, quant, card, count, verdict, monthly):
    p = plan_of(model=mid, quant=quant, context=8192, runtime="rule-of-thumb", priced=True)
    best = p.first.option
    assert (best.gpu.name, best.count, best.verdict) == (card, count, verdict)
    assert best.monthly_usd == pytest.approx(monthly)


def test_70b_bf16_fits_one_h200():
    """Llama 3.1 70B in BF16 with 8K context fits one H200 (measured), though the guide's lookup
    table sends it to an MI300X: 141 GB sold, 143,771 MiB = 150.8 GB usable."""
    p = plan_of(model="llama-3.1-70b", quant="bf16", context=8192, runtime="transformers", gpu="H200")
    assert p.first.option.verdict in ("fits", "tight")
    assert p.first.option.usable_bytes == 143_771 * 2**20


def test_fp8_on_a100_is_no():
    """the GPU Rent Hub guide section 01: the A100, A40, RTX A6000, RTX 3090 and RTX A5000 have no FP8."""
    for card in ("A100 SXM 80GB", "A40", "RTX A6000", "RTX 3090", "RTX A5000"):
        p = plan_of(model="shape-7b", quant="fp8", context=8192, runtime="rule-of-thumb", gpu=card)
        assert p.first.option.verdict == "no"
        assert "FP8" in p.first.option.reason


# Primcast's bare-metal page (bare-metal page, "Step three"): the smallest card of its catalog holding 1.5x
# the weights.
BARE_METAL_CARDS = ["Tesla P4", "Titan V", "Tesla P40", "Quadro P6000", "V100 32GB", "RTX A6000", "MI210",
                 "RTX PRO 6000"]
BARE_METAL_TABLE = [  # (weights GB as the guide gives them, the guide's card; None = "more than one card")
    (16, "Tesla P40"), (8, "Titan V"), (5, "Tesla P4"),  # 7-8B at 16/8/4-bit
    (28, "RTX A6000"), (14, "Tesla P40"), (8, "Titan V"),  # 13-14B
    (68, None), (34, "MI210"), (19, "Tesla V100 32GB"),  # 30-34B
    (140, None), (70, None), (38, "MI210"),  # 70B
]


@pytest.mark.parametrize("weights_gb,card", BARE_METAL_TABLE)
def test_smallest_card_by_headroom_bare_metal_page(weights_gb, card):
    from cardfit.catalog.gpus import default_gpus
    from cardfit.core.fit import smallest_by_headroom

    gpus = [default_gpus().get(n) for n in BARE_METAL_CARDS]
    got = smallest_by_headroom(int(weights_gb * 1e9), gpus, 1.5)
    if weights_gb == 34:
        # 51 GB needed: the guide's A6000 is "48 GB" as sold, but with ECC off (the workstation default) it
        # reports 49,140 MiB = 51.5 GB, just enough; the guide's MI210 is the next card up.
        assert got is not None and got.name == "RTX A6000"
    elif weights_gb == 68:
        # The guide says "more than one card": 102 GB against the PRO 6000's 96 GB as sold; the driver reports
        # 97,887 MiB = 102.6 GB, so by usable bytes the single card just holds it.
        assert got is not None and got.name == "RTX PRO 6000 Blackwell"
    elif card is None:
        assert got is None
    else:
        assert got is not None and got.name.startswith(card.split(" /")[0]), (weights_gb, got)
    # Pascal cards (P4, P40, P6000) and Volta lack BF16: the guide warns older cards fall back or refuse
    if got is not None and got.arch in ("pascal", "volta"):
        assert not got.bf16


def test_plan_headroom_answer(run_json):
    r = run_json("plan", "--params", "8e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
                 "--quant", "bf16", "--headroom", "1.5", "--context", "4096")
    smallest = r["answers"]["smallest_card_by_headroom"]
    usable = {g["gpu"]: g["usable_bytes"] for g in r["gpus"]}
    assert usable[smallest] >= 1.5 * 16e9
    assert all(u < 1.5 * 16e9 or u >= usable[smallest] for u in usable.values())
