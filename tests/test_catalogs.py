"""Catalog data checks: geometry against upstream tables, names unique, every number sourced."""

from __future__ import annotations

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.tensors import has_shapes, shape_params


def test_gguf_block_geometry_matches_gguf_package():
    """STYLE.md: quant types stored as exact block geometry, checked against gguf-py's own table."""
    from gguf.constants import GGML_QUANT_SIZES

    qc = default_quants()
    checked = 0
    for t, (block, nbytes) in GGML_QUANT_SIZES.items():
        q = qc.by_ggml_type(t.value)
        if q is None:
            continue
        assert (q.block_weights, q.block_bytes) == (block, nbytes), t.name
        if q.kind == "gguf":
            assert q.ggml_type == t.value and q.name == t.name
        checked += 1
    assert checked >= 30


def test_gguf_mix_ftypes_match_gguf_package():
    from gguf.constants import LlamaFileType

    qc = default_quants()
    for m in qc.mixes:
        assert LlamaFileType[f"MOSTLY_{m.name}"].value == m.ftype, m.name


@pytest.mark.parametrize("name,bpw", [("Q8_0", 8.5), ("Q4_K", 4.5), ("Q6_K", 6.5625), ("MXFP4", 4.25),
                                      ("Q2_K", 2.625), ("IQ4_XS", 4.25), ("bf16", 16), ("fp8", 8)])
def test_bits_per_weight(name, bpw):
    assert default_quants().type(name).bits_per_weight == bpw


def test_every_gpu_has_source_and_sane_numbers():
    for g in default_gpus():
        assert g.source, g.id
        # 5.3 GiB: an 8 GB Apple M1's GPU share; 384 GiB: a 512 GB M3 Ultra's
        assert 5 * 2**30 <= g.usable_bytes <= 400 * 2**30, g.id
        assert g.usable_source and g.bandwidth_gbps is not None, g.id
        if g.monthly_usd is not None:
            assert g.price_source and g.price_date, g.id
        assert 60 <= g.bandwidth_gbps <= 10_000, g.id  # Apple M1: 68.25 GB/s


def test_usable_bytes_spec_readings():
    """nvidia-smi memory.total as the cards report it: H200 143,771 MiB, H100 80GB 81,559 MiB, RTX 4090
    24,564 MiB."""
    gpus = default_gpus()
    assert gpus.get("H200").usable_bytes == 143_771 * 2**20
    assert gpus.get("H100 SXM").usable_bytes == 81_559 * 2**20
    assert gpus.get("RTX 4090").usable_bytes == 24_564 * 2**20


def test_seed_fleet_is_complete():
    """the GPU Rent Hub guide section 06: the 15 rental cards with monthly prices."""
    fleet = {"MI300X": 1590, "B200": 3890, "H200 SXM": 2290, "H100 SXM": 1690, "H100 PCIe": 1490,
             "A100 SXM": 990, "L40S": 520, "RTX 6000 Ada": 460, "RTX A6000": 290, "A40": 240, "RTX 5090": 540,
             "RTX 4090": 390, "L4": 250, "RTX 3090": 230, "RTX A5000": 190}
    gpus = default_gpus()
    for name, price in fleet.items():
        assert gpus.get(name).monthly_usd == price, name
    assert gpus.get("B200").min_count == 2


@pytest.mark.parametrize("name", ["Tesla P4", "Titan V", "Tesla P40", "Quadro P6000", "V100 32GB", "MI210",
                                  "RTX PRO 6000", "RTX 3060 8GB", "RTX 3060 12GB", "RTX 3070", "RTX 4060",
                                  "RTX 4060 Ti 8GB", "RTX 4060 Ti 16GB", "RTX 4070", "RTX 4080", "RTX 5060",
                                  "RTX 5060 Ti 8GB", "RTX 5060 Ti 16GB", "RTX 5070", "RTX 5080", "H100 NVL"])
def test_seed_catalog_cards_present(name):
    assert default_gpus().get(name)


def test_fp8_support_per_spec():
    gpus = default_gpus()
    for name in ("A100 SXM 80GB", "A40", "RTX A6000", "RTX 3090", "RTX A5000", "V100 32GB", "Tesla P40"):
        assert not gpus.get(name).fp8, name
    for name in ("H100 SXM", "H200", "L40S", "RTX 4090", "RTX 5090", "MI300X", "L4"):
        assert gpus.get(name).fp8, name
    for name in ("V100 32GB", "Tesla P40", "Titan V"):
        assert not gpus.get(name).bf16, name


def test_model_params_agree_with_shapes():
    """The stated parameter count and the count from config.json shapes agree (where the catalog says the
    count is exact and the model has no vision tower), so per-tensor sizing is trustworthy."""
    for m in default_models():
        if not has_shapes(m) or "params" in m.estimated or m.text_params or m.global_kv_heads:
            continue
        ratio = shape_params(m) / m.params
        assert abs(ratio - 1) < 0.03, (m.id, ratio)


def test_every_model_sourced_and_names_unique():
    owner: dict[str, str] = {}
    for m in default_models():
        assert m.source, m.id
        for n in {x.lower() for x in m.names}:
            assert owner.setdefault(n, m.id) == m.id, (n, owner[n], m.id)


def test_ollama_guide_table_in_catalog():
    """GPUFlow's Ollama guide: 30 Ollama tags with 4-bit and Q8_0 sizes."""
    tags = {t.tag: t for m in default_models() for t in m.ollama}
    assert len(tags) >= 30
    assert tags["llama3.1:8b"].download_gb == 4.9 and tags["llama3.1:8b"].q8_download_gb == 8.5
    assert tags["qwen3:8b"].download_gb == 5.2
    assert tags["gpt-oss:120b"].quant.upper() == "MXFP4"


def test_runtimes_cover_spec():
    rts = default_runtimes()
    for name in ("vllm", "llama.cpp", "ollama", "transformers", "sglang", "tgi"):
        assert rts.get(name).source
