"""docs/VALIDATION.md's counts and error table are generated from the records (scripts/validation_doc.py)."""

from __future__ import annotations

from pathlib import Path

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


def _script():
    return load_script("validation_doc")


def test_validation_doc_matches_the_data():
    doc = _script()
    text = doc.DOC.read_text(encoding="utf-8")
    assert doc.updated(text, doc.render()) == text, ("docs/VALIDATION.md is stale: run python "
                                                     "scripts/validation_doc.py")


def test_source_grouping():
    doc = _script()
    assert (
        doc.source_of("https://github.com/ggml-org/llama.cpp/discussions/4167")
        == "github.com/ggml-org/llama.cpp"
    )
    assert (
        doc.source_of("https://pypi.org/project/aiconfigurator-core/0.12.0/")
        == "pypi.org/project/aiconfigurator-core"
    )
    assert doc.source_of("https://www.tianchengwu.com/2026/04/05/x") == "tianchengwu.com"
