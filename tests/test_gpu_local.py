"""`--gpu local`: fake nvidia-smi / rocm-smi / macOS tools on PATH, the way a user's machine shows them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

MIB = 2**20


def _tool(bindir: Path, name: str, script: str) -> None:
    p = bindir / name
    p.write_text("#!/bin/sh\n" + script)
    p.chmod(0o755)


@pytest.fixture()
def bindir(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    return d


def _json(run_cli, bindir, *args):
    code, out, err = run_cli(*args, "--json", env={"PATH": str(bindir)})
    assert code == 0, err
    return json.loads(out)


def test_nvidia_smi_card_in_the_catalog(run_cli, bindir):
    # the exact line nvidia-smi prints for an RTX 4090 (24,564 MiB: the catalog's own reading)
    _tool(bindir, "nvidia-smi", 'echo "NVIDIA GeForce RTX 4090, 24564"\n')
    out = _json(run_cli, bindir, "plan", "llama3.1:8b", "--gpu", "local")
    card = out["gpus"][0]
    assert card["gpu"] == "RTX 4090" and card["usable_bytes"] == 24564 * MIB
    assert card["decode_tokens_per_s"]  # the catalog card's bandwidth comes along


def test_nvidia_smi_reported_bytes_win_over_the_catalog(run_cli, bindir):
    """An H100 with a different total (another driver, ECC off) is planned with what the machine reports."""
    _tool(bindir, "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3, 81000"\necho "NVIDIA H100 80GB HBM3, 81000"\n')
    out = _json(run_cli, bindir, "max-context", "llama3.1:8b", "--gpu", "local")
    assert "H100" in json.dumps(out)


def test_nvidia_smi_unknown_card_is_planned_ad_hoc(run_cli, bindir):
    _tool(bindir, "nvidia-smi", 'echo "NVIDIA Imaginary X1, 40000"\n')
    out = _json(run_cli, bindir, "plan", "llama3.1:8b", "--gpu", "local")
    card = out["gpus"][0]
    assert card["gpu"] == "NVIDIA Imaginary X1" and card["usable_bytes"] == 40000 * MIB
    assert card["decode_tokens_per_s"] is None  # no bandwidth known: no speed invented


def test_rocm_smi(run_cli, bindir):
    data = {"card0": {"Card Series": "Radeon RX 7900 XTX",
                      "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
                      "VRAM Total Memory (B)": "25753026560", "VRAM Total Used Memory (B)": "1000000"}}
    _tool(bindir, "rocm-smi", f"echo '{json.dumps(data)}'\n")
    out = _json(run_cli, bindir, "plan", "llama3.1:8b", "--gpu", "local")
    assert out["gpus"][0]["gpu"] == "Radeon RX 7900 XTX"
    assert out["gpus"][0]["usable_bytes"] == 25753026560


MAC_PROFILER = """echo 'Graphics/Displays:

    Apple M3 Max:

      Chipset Model: Apple M3 Max
      Type: GPU
      Bus: Built-In
      Total Number of Cores: 40
      Vendor: Apple (0x106b)
      Metal Support: Metal 3'
"""


@pytest.mark.parametrize("wired_mib,usable", [(0, 48 * 2**30), (57344, 57344 * MIB)])
def test_macos(run_cli, bindir, wired_mib, usable):
    """64 GB M3 Max: the default wired limit (3/4 of RAM), or the one `sysctl iogpu.wired_limit_mb` set."""
    _tool(bindir, "system_profiler", MAC_PROFILER)
    _tool(bindir, "sysctl",
          f'case "$2" in hw.memsize) echo 68719476736;; iogpu.wired_limit_mb) echo {wired_mib};; '
                            'esac\n')
    out = _json(run_cli, bindir, "plan", "llama3.1:8b", "--gpu", "local")
    card = out["gpus"][0]
    assert card["gpu"] == "Apple M3 Max 64GB" and card["usable_bytes"] == usable
    assert out["memory"]["overhead_bytes"] == 0 and out["memory"]["unified_memory"]


def test_no_tool_is_one_clean_line(run_cli, bindir):
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "local", env={"PATH": str(bindir)})
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert err.startswith("Error: --gpu local: no nvidia-smi, rocm-smi or macOS system_profiler")
    assert "Traceback" not in err


def test_failing_tool_is_one_clean_line(run_cli, bindir):
    _tool(bindir, "nvidia-smi",
          "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                "driver.\" >&2\nexit 9\n")
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "local", env={"PATH": str(bindir)})
    assert code == 2 and "Traceback" not in err
    assert err.startswith("Error: --gpu local: `nvidia-smi` failed (exit 9: NVIDIA-SMI has failed")


def test_garbled_tool_output_is_one_clean_line(run_cli, bindir):
    _tool(bindir, "nvidia-smi", 'echo "no devices were found"\n')
    code, _, err = run_cli("plan", "llama3.1:8b", "--gpu", "local", env={"PATH": str(bindir)})
    assert code == 2 and err.startswith("Error: --gpu local: cannot read nvidia-smi's output")


def test_local_in_python_api(bindir, monkeypatch):
    from cardfit.catalog.gpus import load_gpus

    _tool(bindir, "nvidia-smi", 'echo "Tesla T4, 15360"\n')
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    assert load_gpus().get("local").name == "Tesla T4"


# `cardfit stack --gpu local`: every card nvidia-smi lists, in its order (PCI bus), unequal cards included
TWO_CARDS = 'echo "NVIDIA GeForce RTX 3090, 24576"\necho "NVIDIA GeForce RTX 3060, 12288"\n'


def test_stack_local_reads_every_card_in_nvidia_smi_order(run_cli, bindir):
    _tool(bindir, "nvidia-smi", TWO_CARDS)
    out = _json(run_cli, bindir, "stack", "--model", "chat=llama3.1:8b", "--model", "embed=bge-m3",
                "--runtime", "llama.cpp", "--gpu", "local")
    assert [d["gpu"] for d in out["devices"]] == ["RTX 3090", "RTX 3060 12GB"]
    assert [d["usable_bytes"] for d in out["devices"]] == [24576 * MIB, 12288 * MIB]
    # CUDA numbers cards fastest first unless told otherwise: the script numbers them as nvidia-smi does
    script = out["bundle"]["text"]
    assert script.count("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=") == 2


def test_stack_one_card_needs_no_device_order(run_cli, bindir):
    _tool(bindir, "nvidia-smi", 'echo "NVIDIA GeForce RTX 4090, 24564"\n')
    out = _json(run_cli, bindir, "stack", "--model", "chat=llama3.1:8b", "--runtime", "llama.cpp",
                "--gpu", "local")
    assert [d["gpu"] for d in out["devices"]] == ["RTX 4090"]
    assert "CUDA_DEVICE_ORDER" not in out["bundle"]["text"]


def test_stack_local_with_a_count_is_one_clean_line(run_cli, bindir):
    _tool(bindir, "nvidia-smi", TWO_CARDS)
    code, _, err = run_cli("stack", "--model", "chat=llama3.1:8b", "--gpu", "2x local",
                           env={"PATH": str(bindir)})
    assert code == 2 and err.startswith("Error: 'local' is every card of this machine")


def test_rocm_cards_in_number_order(bindir, monkeypatch):
    """rocm-smi's JSON keys card0 … card10: card10 is the eleventh card, not the second."""
    from cardfit.catalog.local import read_local_cards

    data = {f"card{i}": {"Card Series": "Radeon RX 7900 XTX" if i != 10 else "Radeon RX 7600",
                         "VRAM Total Memory (B)": str((24 if i != 10 else 8) * 2**30)} for i in range(11)}
    _tool(bindir, "rocm-smi", f"echo '{json.dumps(data)}'\n")
    monkeypatch.setenv("PATH", str(bindir))
    cards = read_local_cards()
    assert [c.name for c in cards] == ["Radeon RX 7900 XTX"] * 10 + ["Radeon RX 7600"]


@pytest.mark.parametrize("tool, gpus, message", [
    ('echo "NVIDIA Imaginary X1, 16384"\n', ["local"],
     "--gpu local: 'NVIDIA Imaginary X1' is not in the catalog"),
    (TWO_CARDS, ["local", "local"], "'local' is every card of this machine: give it once"),
])
def test_stack_local_refusals_are_one_clean_line(run_cli, bindir, tool, gpus, message):
    _tool(bindir, "nvidia-smi", tool)
    args = [w for g in gpus for w in ("--gpu", g)]
    code, out, err = run_cli("stack", "--model", "chat=llama3.1:8b", *args, env={"PATH": str(bindir)})
    assert code == 2 and not out and err.startswith(f"Error: {message}"), err
    assert len(err.strip().splitlines()) == 1
