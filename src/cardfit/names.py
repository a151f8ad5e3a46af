"""Name matching shared by every catalog: case, spaces, dashes and a few filler words never matter,
and unknown names get the closest suggestions."""

from __future__ import annotations

# dropped from names: whitespace (any, as str.split sees it) and these
_DROP = str.maketrans("", "", "_-./:")


def norm(name: str) -> str:
    """'NVIDIA RTX-4090 24GB' → 'nvidiartx409024gb'. (str methods, no regular expression: every catalog name
    goes through here when a command starts.)"""
    return "".join(name.lower().split()).translate(_DROP)


def closest(name: str, candidates: dict[str, str], n: int = 3) -> list[str]:
    """Suggest display names whose normalized form is close to `name`."""
    key = norm(name)
    import difflib  # only on a miss: suggestions are for error messages

    hits = difflib.get_close_matches(key, list(candidates), n=n, cutoff=0.6)
    if not hits:
        hits = [k for k in candidates if key and (key in k or k in key)][:n]
    seen: list[str] = []
    for h in hits:
        if candidates[h] not in seen:
            seen.append(candidates[h])
    return seen
