"""The README accuracy table from `cardfit validate` (out-of-sample columns first).

    python scripts/accuracy_table.py            # print it
    python scripts/accuracy_table.py --readme   # replace the table in README.md (section Accuracy)"""

from __future__ import annotations

import sys
from pathlib import Path

from cardfit.services.validate import validate

README = Path(__file__).resolve().parents[1] / "README.md"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def table() -> list[str]:
    rep = validate()
    lines = ["| kind | records | sources (largest) | out of sample: median | p90 | p90 over | "
             "in sample: median | p90 | worst |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, k in rep.kinds.items():
        if not k.n:
            continue
        n = f"{k.n} ({k.loo_n} out of sample)" if k.loo_n is not None and k.loo_n != k.n else str(k.n)
        lines.append(f"| {kind} | {n} | {k.sources} ({k.largest_source_records}) | "
                     f"{pct(k.loo_median_abs_error)} | {pct(k.loo_p90_abs_error)} | "
                     f"{pct(k.loo_p90_over_error)} | {pct(k.median_abs_error)} | "
                     f"{pct(k.p90_abs_error)} | {pct(k.max_abs_error)} |")
    return lines


def replace_in_readme(lines: list[str]) -> None:
    text = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("| kind |"))
    end = next(i for i in range(start, len(text)) if not text[i].startswith("|"))
    README.write_text("\n".join(text[:start] + lines + text[end:]) + "\n", encoding="utf-8")


if __name__ == "__main__":
    rows = table()
    if "--readme" in sys.argv[1:]:
        replace_in_readme(rows)
    else:
        print("\n".join(rows))
