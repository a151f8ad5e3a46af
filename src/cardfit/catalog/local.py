"""`--gpu local`: the card in this machine, as its own tool reports it, matched to a catalog card.

Read in this order (the first tool found answers):
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits   ("NVIDIA GeForce RTX 4090, 24564")
  rocm-smi --showproductname --showmeminfo vram --json   ("Card Series", "VRAM Total Memory (B)")
  macOS: sysctl -n hw.memsize and iogpu.wired_limit_mb; system_profiler SPDisplaysDataType ("Chipset Model")
The catalog card keeps its bandwidth and TFLOPS; its usable bytes become what this machine reports. A card the
catalog does not know becomes an ad-hoc card with the reported bytes and no speed figures."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from fractions import Fraction

from ..errors import CatalogError

MIB = 2**20
TIMEOUT_S = 10
NO_TOOL = ("--gpu local: no nvidia-smi, rocm-smi or macOS system_profiler on this machine's PATH; name the "
           "card instead (`cardfit gpus` lists them)")
_VENDOR_WORDS = re.compile(r"^(nvidia|amd|ati|apple|geforce|radeon|instinct|tesla|quadro)\s+", re.I)
# macOS default GPU wired limit (iogpu.wired_limit_mb = 0): 2/3 of RAM up to 36 GiB, 3/4 above; source and the
# readings it reproduces: scripts/catalog_sources/gpus.toml [apple_rule]
APPLE_SMALL, APPLE_LARGE, APPLE_SMALL_MAX_GIB = Fraction(2, 3), Fraction(3, 4), 36


@dataclass(frozen=True, slots=True)
class Reading:
    tool: str
    name: str
    usable_bytes: int
    vendor: str
    stack: str
    count: int = 1
    memory_gib: int = 0  # Apple: the machine's RAM


def _run(args: list[str]) -> str:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CatalogError(f"--gpu local: `{' '.join(args)}` did not run ({e.__class__.__name__})") from e
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise CatalogError(f"--gpu local: `{args[0]}` failed (exit {proc.returncode}"
                           f"{': ' + why[0][:120] if why else ''}); name the card instead")
    return proc.stdout


def _bad(tool: str, what: str) -> CatalogError:
    return CatalogError(f"--gpu local: cannot read {tool}'s output ({what}); name the card instead")


def _nvidia_cards() -> list[Reading]:
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
    rows = [line.rsplit(",", 1) for line in out.strip().splitlines() if line.strip()]
    if not rows or any(len(r) != 2 or not r[1].strip().isdigit() for r in rows):
        raise _bad("nvidia-smi", "expected 'name, MiB' lines")
    return [Reading("nvidia-smi", r[0].strip(), int(r[1]) * MIB, "nvidia", "cuda") for r in rows]


def _first(cards: list[Reading]) -> Reading:
    """The first card, counted with the cards of its name (`--gpu local` plans that set)."""
    from dataclasses import replace

    return replace(cards[0], count=sum(1 for c in cards if c.name == cards[0].name))


def read_nvidia() -> Reading:
    return _first(_nvidia_cards())


def _rocm_cards() -> list[Reading]:
    out = _run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"])
    try:
        data = json.loads(out)
    except ValueError as e:
        raise _bad("rocm-smi", "not JSON") from e
    cards = [v for k, v in sorted(data.items(), key=lambda kv: _card_index(kv[0]))
             if k.startswith("card") and isinstance(v, dict)] if isinstance(data, dict) else []
    if not cards:
        raise _bad("rocm-smi", "no card entries")
    out_cards = []
    for c in cards:
        name = str(c.get("Card Series") or c.get("Card series") or c.get("Card Model") or "").strip()
        total = str(c.get("VRAM Total Memory (B)", "")).strip()
        if not name or not total.isdigit():
            raise _bad("rocm-smi", "no 'Card Series' or 'VRAM Total Memory (B)'")
        out_cards.append(Reading("rocm-smi", name, int(total), "amd", "rocm"))
    return out_cards


def _card_index(key: str) -> tuple[int, str]:
    """rocm-smi's keys card0 … card10 in number order (a plain sort puts card10 before card2)."""
    digits = key[4:]
    return (int(digits), key) if digits.isdigit() and len(digits) <= 4 else (10**5, key)


def read_rocm() -> Reading:
    return _first(_rocm_cards())


def read_macos() -> Reading:
    mem = _run(["sysctl", "-n", "hw.memsize"]).strip()
    if not mem.isdigit():
        raise _bad("sysctl hw.memsize", "not a byte count")
    chip = re.search(r"Chipset Model:\s*(.+)", _run(["system_profiler", "SPDisplaysDataType"]))
    if not chip:
        raise _bad("system_profiler SPDisplaysDataType", "no 'Chipset Model'")
    ram = int(mem)
    gib = round(ram / 2**30)
    try:
        wired_mib = int(_run(["sysctl", "-n", "iogpu.wired_limit_mb"]).strip() or 0)
    except (CatalogError, ValueError):
        wired_mib = 0  # older macOS has no such key: the default limit applies
    share = APPLE_SMALL if gib <= APPLE_SMALL_MAX_GIB else APPLE_LARGE
    usable = wired_mib * MIB if wired_mib > 0 else int(Fraction(ram) * share)
    return Reading("macOS sysctl + system_profiler", chip.group(1).strip(), usable, "apple", "metal",
                   memory_gib=gib)


def read_local() -> Reading:
    if shutil.which("nvidia-smi"):
        return read_nvidia()
    if shutil.which("rocm-smi"):
        return read_rocm()
    if shutil.which("system_profiler") and shutil.which("sysctl"):
        return read_macos()
    raise CatalogError(NO_TOOL)


def read_local_cards() -> list[Reading]:
    """Every card in this machine, one Reading each, in the order its tool lists them: nvidia-smi and
    rocm-smi number cards by PCI bus, the numbering containers and CUDA_DEVICE_ORDER=PCI_BUS_ID use
    (NVIDIA CUDA C++ Programming Guide, "CUDA Environment Variables"); a Mac is one."""
    if shutil.which("nvidia-smi"):
        return _nvidia_cards()
    if shutil.which("rocm-smi"):
        return _rocm_cards()
    if shutil.which("system_profiler") and shutil.which("sysctl"):
        return [read_macos()]
    raise CatalogError(NO_TOOL)


def candidates(r: Reading) -> list[str]:
    """The names to look the card up by: as reported, then without vendor words (and with the RAM, Apple)."""
    names = [r.name]
    if r.memory_gib:
        names.insert(0, f"{r.name} {r.memory_gib}GB")
    out = []
    for n in names:
        while True:
            out.append(n)
            stripped = _VENDOR_WORDS.sub("", n)
            if stripped == n:
                break
            n = stripped
    return out
