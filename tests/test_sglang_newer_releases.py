"""SGLang's releases after cardfit's current one (data/releases.toml sglang `current`), read in their PyPI
wheels: the decode-graph flag renamed in 0.5.14 (graph_flags_by_phase) and the 20-35 GiB card row of 0.5.20
(tier_35gib_4k_48). `--runtime sglang` (the current release) and `sglang@0.5.9` answer as before; a release
from the feature's on takes the newer default."""

import pytest

from cardfit.catalog.releases import at_release
from cardfit.catalog.runtimes import default_runtimes, graph_max_batch
from cardfit.runtimes import adapter
from cardfit.runtimes.launch import Launch
from cardfit.runtimes.sglang import default_chunk, reserved_mib

RTX_4090_MIB = 24564  # torch's total memory of an RTX 4090 (runtimes.toml gpu_memory_utilization_note)
H100_MIB = 81559


def _at(rel: str):
    return at_release(default_runtimes().get("sglang"), rel)


@pytest.mark.parametrize("rel, chunk, graphs_tp1, graphs_tp4, reserve, source", [
    # python/sglang/srt/server_args.py _handle_gpu_memory_settings, PyPI wheels 0.5.9 and 0.5.19:
    # "elif gpu_mem < 35 * 1024: # A10, 4090, 5090 ... chunked_prefill_size = 2048 ... max_bs 24 / 80";
    # reserve 512 + 2048 * 1.5 + 24 * 2 + 1 / 8 * 1024 = 3760 MiB
    ("", 2048, 24, 80, 3760, "the current release (0.5.9)"),
    ("0.5.9", 2048, 24, 80, 3760, "server_args.py 0.5.9"),
    ("0.5.19", 2048, 24, 80, 3760, "server_args.py 0.5.19"),
    # arg_groups/memory_hook.py handle_gpu_memory_settings, PyPI wheels 0.5.20 and 0.5.23:
    # "(chunked_prefill_size 4k, max_bs 48 if tp < 4 else 160)";
    # reserve 512 + 4096 * 1.5 + 48 * 2 + 128 = 6880 MiB
    ("0.5.20", 4096, 48, 160, 6880, "memory_hook.py 0.5.20"),
    ("0.5.23", 4096, 48, 160, 6880, "memory_hook.py 0.5.23"),
])
def test_the_4090_row_follows_the_release(rel, chunk, graphs_tp1, graphs_tp4, reserve, source):
    rt = _at(rel)
    assert default_chunk(rt, RTX_4090_MIB) == chunk, source
    assert graph_max_batch(rt, 24, 1) == graphs_tp1, source
    assert graph_max_batch(rt, 24, 4) == graphs_tp4, source
    assert reserved_mib(rt, RTX_4090_MIB, 1, 1) == reserve, source


@pytest.mark.parametrize("rel", ["", "0.5.9", "0.5.20", "0.5.23"])
def test_the_other_rows_are_unchanged(rel):
    """memory_hook.py 0.5.23: 8192 and max_bs 256 / 512 on an 80 GB card, as server_args.py 0.5.9."""
    rt = _at(rel)
    assert default_chunk(rt, H100_MIB) == 8192
    assert graph_max_batch(rt, 80, 1) == 256 and graph_max_batch(rt, 80, 4) == 512
    assert reserved_mib(rt, H100_MIB, 1, 1) == 13440


def test_a_plain_profile_is_the_current_release():
    """A profile named without a release (release None) answers as the current one, 0.5.9."""
    plain = default_runtimes().get("sglang")
    assert plain.release is None
    assert default_chunk(plain, RTX_4090_MIB) == 2048 and graph_max_batch(plain, 24, 1) == 24


@pytest.mark.parametrize("rel, flag", [
    ("", "--cuda-graph-max-bs"),  # current 0.5.9: server_args.py add_argument("--cuda-graph-max-bs")
    ("0.5.13", "--cuda-graph-max-bs"),
    # 0.5.14 and 0.5.19: field cuda_graph_max_bs_decode, "--cuda-graph-max-bs" a DeprecatedAliasStoreAction
    ("0.5.14", "--cuda-graph-max-bs-decode"),
    # 0.5.20, 0.5.23: arg_groups/fields/ cuda_graph_max_bs_decode, no "--cuda-graph-max-bs" at all
    ("0.5.23", "--cuda-graph-max-bs-decode"),
])
def test_the_graph_cap_flag_follows_the_release(rel, flag):
    engine = adapter(_at(rel))
    line = engine.cuda_graph_cap(Launch(runtime="sglang", argv=("python", "-m", "sglang.launch_server")), 64)
    assert line.argv[-2:] == (flag, "64")
