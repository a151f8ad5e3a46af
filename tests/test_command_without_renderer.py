"""Adding a command is one service module plus one table row: a row that names no renderer still gets its CLI
command (options from its input class, help from the row's summary, --json) on both command-line readers,
printing the result's keys as indented lines."""

from __future__ import annotations

import json

import pytest

from cardfit.cli import commands as cli_commands
from cardfit.cli import main
from cardfit.services import table
from cardfit.services.table import Command

ROW = Command("context-plain", "reverse", "MaxContextInput", "max_context", "",
              "Longest context that fits, printed without a renderer of its own")


@pytest.fixture
def extra_row(monkeypatch):
    monkeypatch.setattr(table, "COMMANDS", (*table.COMMANDS, ROW))
    monkeypatch.setattr(table, "BY_NAME", {**table.BY_NAME, ROW.name: ROW})
    yield ROW
    cli_commands.SPECS.pop(ROW.name, None)


def test_plain_command_line_prints_the_results_keys(extra_row, capsys):
    assert main(["context-plain", "llama3.1:8b", "--gpu", "RTX 4090"]) == 0
    text = capsys.readouterr().out
    assert main(["context-plain", "llama3.1:8b", "--gpu", "RTX 4090", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    lines = text.splitlines()
    for key, value in data.items():  # every top-level key, a scalar with its value
        shown = [ln for ln in lines if ln.startswith(f"{key}:")]
        assert shown, key
        if not isinstance(value, dict | list) or not value:
            assert shown[0] == f"{key}: {'none' if value is None else value}"


def test_click_reads_the_row_too_with_its_summary_as_help(extra_row, capsys):
    assert main(["context-plain", "--help"]) == 0
    out = capsys.readouterr().out
    assert ROW.summary in out and "--gpu" in out and "--json" in out
    assert main(["context-plain", "llama3.1:8b", "--gpu=RTX 4090", "--unknown"]) == 2  # click's usage error
    assert "No such option" in capsys.readouterr().err
