"""Name matching shared by every catalog: case, spaces, dashes and a few filler words never matter,
and unknown names get the closest suggestions."""

from __future__ import annotations

# dropped from names: whitespace (any, as str.split sees it) and these
_DROP = str.maketrans("", "", "_-./:")
# the same for an ASCII name, as bytes: ASCII whitespace (str.isspace: \t \n \v \f \r, \x1c-\x1f and space)
_DROP_ASCII = bytes(c for c in range(128) if chr(c).isspace() or chr(c) in "_-./:")


def norm(name: str) -> str:
    """'NVIDIA RTX-4090 24GB' → 'nvidiartx409024gb'. (No regular expression: every catalog name goes through
    here when a command starts. An ASCII name, nearly all, is deleted from and lowered as bytes, in C: a
    str.translate table maps each character through a dict, ~3x the cost.)"""
    if name.isascii():
        return name.encode().translate(None, _DROP_ASCII).lower().decode()
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
