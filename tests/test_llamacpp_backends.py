"""llama.cpp decode from a table that names the ggml backend of each row (data/validation/
speed_llamacpp_backends.toml: ggml-org/llama.cpp issue #26663, RX 9070 XT, build b10298, HIP and Vulkan on one
machine). The HIP rows are records, scored at first contact by the code before the source was added
(data/first_contact.toml, never edited afterwards: HELD); today's error of each is held too (TODAY), so that a
change of the llama.cpp decode model shows here. The Vulkan rows of the same table are not records (cardfit
models no Vulkan backend); what they say about the per-layer time is pinned below (docs/VALIDATION.md
"llama.cpp decode on consumer cards: the llmfit runs and the backend")."""

from __future__ import annotations

import re

import pytest

from cardfit.validation.single import implied_overhead_us_per_layer
from cardfit.validation.validate import all_records

from .helpers import check_first_contact, check_today, first_contact_rows

FILE = "speed_llamacpp_backends.toml"
RECORDS = [r for r in all_records() if r.get("file") == FILE]
FIRST = first_contact_rows()
# the commit whose code scored the file at first contact (scripts/first_contact.py --new, 2026-12-07)
CODE_AT = "5c3cdbde40ce494e38f0114396deb5321c33b35a"

# predicted / measured - 1 at first contact, per record (5c3cdbd): too slow by 11-15 % at every size
HELD = {
    "llamacpp26663-9070xt-qwen3-0.6b-q4_k_m-hip-tg128": -0.146,
    "llamacpp26663-9070xt-qwen3-1.7b-q4_k_m-hip-tg128": -0.144,
    "llamacpp26663-9070xt-qwen3-4b-q4_k_m-hip-tg128": -0.109,
    "llamacpp26663-9070xt-qwen3-8b-q4_k_m-hip-tg128": -0.126,
}
# today, in sample since the source joined the llama.cpp decode fits (runtimes.toml refitted 2026-12-07:
# decode_overhead_us_per_layer 117.8 -> 111.2 us), so a change of the llama.cpp decode model shows here
TODAY = {
    "llamacpp26663-9070xt-qwen3-0.6b-q4_k_m-hip-tg128": -0.104,
    "llamacpp26663-9070xt-qwen3-1.7b-q4_k_m-hip-tg128": -0.113,
    "llamacpp26663-9070xt-qwen3-4b-q4_k_m-hip-tg128": -0.084,
    "llamacpp26663-9070xt-qwen3-8b-q4_k_m-hip-tg128": -0.109,
}


def test_every_record_has_a_held_error():
    assert sorted(HELD) == sorted(r["id"] for r in RECORDS) == sorted(TODAY)


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_first_contact_row_is_the_code_before_the_source(r):
    check_first_contact(r, FIRST, FILE, CODE_AT, HELD)


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_scores_within_its_held_error(r):
    check_today(r, TODAY)


def _tg128(excerpt: str, size: str, backend: str) -> float:
    """The tg128 t/s of the excerpt's row for one model size and backend (the table's sixth column)."""
    for line in excerpt.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0] == size and cells[2] == backend:
            return float(cells[5])
    raise AssertionError(f"no {size} {backend} row")


def _size(r: dict) -> str:
    m = re.search(r"qwen3-([0-9.]+b)", r["model"])
    assert m
    return m.group(1).upper()


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_is_the_hip_row_of_its_excerpt(r):
    """Each record is the HIP row (the backend cardfit models for a Radeon card); its Vulkan twin is in the
    excerpt, not a record."""
    assert _tg128(r["excerpt"], _size(r), "hip") == pytest.approx(float(r["measured"]))
    assert _tg128(r["excerpt"], _size(r), "vulkan") > float(r["measured"])


def test_backends_differ_by_a_per_layer_time():
    """One card, one build, one model file per size: what each backend leaves per layer after the bytes are
    streamed at llama.cpp's decode_efficiency. HIP leaves 74-97 us, Vulkan 35-41 us, at every size from 0.6B
    to 8B (28 and 36 layers): the gap is a fixed time per layer (its share of the step falls from 49 % at
    0.6B to 13 % at 8B, as the table's V/H column does: 1.96x to 1.15x), not a bandwidth share. Both sit
    below the one per-layer time cardfit gives every backend of a current build (runtimes.toml
    decode_overhead_us_per_layer, 117.8 us)."""
    for r in RECORDS:
        hip = implied_overhead_us_per_layer(r)
        vulkan = implied_overhead_us_per_layer(dict(r, measured=_tg128(r["excerpt"], _size(r), "vulkan")))
        assert hip is not None and vulkan is not None
        assert 70 < hip < 100, (r["id"], hip)
        assert 33 < vulkan < 43, (r["id"], vulkan)
        assert 30 < hip - vulkan < 62, (r["id"], hip - vulkan)
