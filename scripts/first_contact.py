"""First contact: score a validation source with the code as it stood before the source was added, and keep
that figure (src/cardfit/data/first_contact.toml) beside the record, never edited afterwards.

    python scripts/first_contact.py --added COMMIT FILE  # FILE's records as COMMIT added them, scored by
                                                         # the code of COMMIT's parent (a source of the past)
    python scripts/first_contact.py --new FILE           # a new source not committed yet, scored by HEAD
    python scripts/first_contact.py --aiconfigurator COMMIT  # the whole eligible aiconfigurator sample
                                                         # (validation/aic_sample.py), scored by COMMIT's code

Both append rows for records not in first_contact.toml yet; rows already there are never rewritten. Each row
names the code that scored it (`code_at`, a commit) and when. The scoring runs the old tree's own
`cardfit.validation.validate.predict` in a subprocess (a git worktree of that commit, its own catalog cache),
so
nothing of today's model leaks into the figure. `cardfit validate` reports these rows per kind as its
first-contact column."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "src" / "cardfit" / "data" / "first_contact.toml"
VALIDATION = "src/cardfit/data/validation"

# run inside the old tree: predict every record of one TOML file with that tree's own code
_SCORE = """
import json, sys, tomllib
from cardfit.validation.validate import predict
if sys.argv[1].endswith(".json"):  # records built by today's tree (a sample kept as CSV, not as TOML)
    rows = json.load(open(sys.argv[1], encoding="utf-8"))
else:
    rows = tomllib.load(open(sys.argv[1], "rb")).get("record", [])
for r in rows:
    try:
        o = predict(r)
        print(json.dumps({"id": r["id"], "predicted": o.predicted, "skipped": o.skipped or None}))
    except Exception as e:  # an old tree that cannot read a newer record: no first-contact figure
        print(json.dumps({"id": r["id"], "predicted": None, "skipped": f"{type(e).__name__}: {e}"}))
"""


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def score_at(commit: str, toml_text: str, suffix: str = ".toml") -> list[dict]:
    """The records of `toml_text` (a JSON list of records with suffix ".json") predicted by the tree at
    `commit`."""
    with tempfile.TemporaryDirectory(prefix="cardfit-first-contact-") as tmp:
        tree = Path(tmp) / "tree"
        git("worktree", "add", "--detach", "-q", str(tree), commit)
        try:
            records = Path(tmp) / f"records{suffix}"
            records.write_text(toml_text, encoding="utf-8")
            env = {**os.environ, "PYTHONPATH": str(tree / "src"), "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
            out = subprocess.run([sys.executable, "-c", _SCORE, str(records)], capture_output=True, text=True,
                                 env=env, cwd=tmp, timeout=1800)
            if out.returncode:
                raise SystemExit(f"scoring at {commit} failed: {out.stderr.strip().splitlines()[-1:]}")
            return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        finally:
            git("worktree", "remove", "--force", str(tree))


def stored() -> dict[str, dict]:
    if not STORE.exists():
        return {}
    return {row["id"]: row for row in tomllib.loads(STORE.read_text(encoding="utf-8")).get("score", [])}


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    return json.dumps(str(v), ensure_ascii=False)


def append(rows: list[dict]) -> int:
    """Append rows whose id has no first-contact figure yet; returns how many."""
    have = stored()
    new = [r for r in rows if r["id"] not in have]
    if not new:
        return 0
    text = STORE.read_text(encoding="utf-8") if STORE.exists() else HEADER
    for r in new:
        text += "\n[[score]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in r.items() if v is not None)
    STORE.write_text(text, encoding="utf-8")
    return len(new)


HEADER = """# First contact: each validation record scored by the code as it stood before its source was added
# (scripts/first_contact.py), never edited afterwards. predicted: that code's figure (absent: it could not
# predict the record, `skipped` says why); code_at: the commit whose code scored it; added_in: the commit that
# added the source (absent: scored before its commit). `cardfit validate` reports these per kind.
"""


def rows_for(file: str, toml_text: str, code_at: str, added_in: str | None, date: str) -> list[dict]:
    records = {r["id"]: r for r in tomllib.loads(toml_text).get("record", [])}
    out = []
    for s in score_at(code_at, toml_text):
        r = records[s["id"]]
        out.append({"id": s["id"], "file": file, "kind": r.get("kind"), "measured": float(r["measured"]),
                    "predicted": s["predicted"], "skipped": s["skipped"], "code_at": code_at,
                    "added_in": added_in, "date": date})
    return out


def sample_rows(code_at: str, date: str) -> list[dict]:
    """The aiconfigurator sample's records, built by this tree (validation/aic_sample.py), scored by the code
    of `code_at`: the figures before any change the sample prompts."""
    from cardfit.validation.aic_sample import DATA, records

    recs = {r["id"]: r for r in records()}
    out = []
    for s in score_at(code_at, json.dumps(list(recs.values())), ".json"):
        r = recs[s["id"]]
        out.append({"id": s["id"], "file": Path(DATA).name, "kind": r["kind"],
                    "measured": float(r["measured"]),
                    "predicted": s["predicted"], "skipped": s["skipped"], "code_at": code_at, "date": date})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--added", metavar="COMMIT", help="the commit that added FILE (history)")
    ap.add_argument("--new", action="store_true", help="FILE is a new source: score it with HEAD's code")
    ap.add_argument("--aiconfigurator", metavar="COMMIT",
                    help="score the whole eligible aiconfigurator sample with COMMIT's code")
    ap.add_argument("file", nargs="?", help="a validation TOML file (its path in the repository)")
    a = ap.parse_args(argv)
    if a.aiconfigurator:
        date = subprocess.run(["date", "-u", "+%F"], capture_output=True, text=True).stdout.strip()
        rows = sample_rows(git("rev-parse", a.aiconfigurator), date)
        n = append(rows)
        scored = [r for r in rows if r["predicted"] is not None]
        print(f"aiconfigurator sample: {len(rows)} records, {len(scored)} scored at first contact, {n} rows "
              "appended")
        return 0
    if not a.file:
        ap.error("name FILE")
    rel = str(Path(a.file)) if not Path(a.file).is_absolute() else str(Path(a.file).relative_to(ROOT))
    if a.added:
        added = git("rev-parse", a.added)
        code_at = git("rev-parse", f"{added}^")
        text = git("show", f"{added}:{rel}")
        date = git("show", "-s", "--format=%cs", added)
        rows = rows_for(Path(rel).name, text, code_at, added, date)
    elif a.new:
        code_at = git("rev-parse", "HEAD")
        text = (ROOT / rel).read_text(encoding="utf-8")
        date = subprocess.run(["date", "-u", "+%F"], capture_output=True, text=True).stdout.strip()
        rows = rows_for(Path(rel).name, text, code_at, None, date)
    else:
        ap.error("say --added COMMIT or --new")
    n = append(rows)
    scored = [r for r in rows if r["predicted"] is not None]
    print(f"{Path(rel).name}: {len(rows)} records, {len(scored)} scored at first contact, {n} rows appended")
    return 0


if __name__ == "__main__":
    sys.exit(main())
