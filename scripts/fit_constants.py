"""Fit every constant of cardfit's speed and memory model from the validation records
(src/cardfit/data/validation/*.toml) and compare with, or write into, src/cardfit/data/runtimes.toml.

    python scripts/fit_constants.py            # table: fitted value, stored value, records, sources
    python scripts/fit_constants.py --check    # exit 1 when runtimes.toml differs from the fit
    python scripts/fit_constants.py --write    # rewrite the fitted lines of runtimes.toml

The fit itself lives in cardfit.validation.calibrate (`cardfit validate` refits it per left-out source)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cardfit.validation.calibrate import fit, report_rows, rewrite_runtimes, stored
from cardfit.validation.validate import all_records

RUNTIMES = Path(__file__).resolve().parents[1] / "src" / "cardfit" / "data" / "runtimes.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when runtimes.toml differs from the fit")
    ap.add_argument("--write", action="store_true", help="write the fitted values into runtimes.toml")
    args = ap.parse_args(argv)
    recs = all_records()
    values, have = fit(recs), stored()
    for row in report_rows(recs):
        print(f"{row['constant']:45} fitted {row['fitted']:>14,.4g}  stored {row['stored']:>14,.4g}  "
              f"{row['records']:3} records {row['sources']:2} sources  {row['what']}")
    differ = sorted(k for k in values if abs(values[k] - have.get(k, 0.0)) > 1e-9 * max(abs(values[k]), 1.0))
    if args.write:
        RUNTIMES.write_text(rewrite_runtimes(RUNTIMES.read_text(encoding="utf-8"), values, recs),
                            encoding="utf-8")
        print(f"wrote {RUNTIMES}")
        return 0
    if differ:
        print("differs from runtimes.toml: " + ", ".join(differ))
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
