"""Write src/cardfit/data/aiconfigurator/silicon_sample_eligible.csv from aiconfigurator-core's own
silicon_sample.csv: every row cardfit can express (validation/aic_sample.py why_not), only the columns cardfit
reads, and print why the other rows are left out.

    pip download --no-deps -d /tmp/aic aiconfigurator-core==0.12.0 && unzip -q /tmp/aic/*.whl -d /tmp/aic/w
    python scripts/aic_sample.py /tmp/aic/w/aiconfigurator_core/systems/silicon_sample.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from cardfit.validation.aic_sample import COLUMNS, DATA, eligibility, read_rows

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "cardfit" / "data" / DATA


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="aiconfigurator_core/systems/silicon_sample.csv of the wheel")
    a = ap.parse_args(argv)
    rows = read_rows(Path(a.csv).read_text(encoding="utf-8"))
    keep, reasons = eligibility(rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(keep)
    print(f"{len(rows)} rows: {len(keep)} eligible, written to {OUT.relative_to(ROOT)}")
    for why, n in reasons.most_common():
        print(f"  {n:5d}  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
