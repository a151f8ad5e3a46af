"""cli/argv.py reads a plain command line without click: for every command of the command table and many
random command lines (options with and without '=', flags and their --no- forms, repeated and unknown
options, values click refuses, values that look like options, a second positional argument), it either leaves
the line to click (None) or gives exactly the values click passes to the command."""

from __future__ import annotations

import random

import click
import pytest

from cardfit.cli.app import build_command
from cardfit.cli.argv import Display, read
from cardfit.cli.commands import SPECS, modules
from cardfit.services.inputs import describe
from cardfit.services.table import BY_NAME, COMMANDS

VALUES = ["llama3.1:8b", "RTX 4090", "8192", "0", "-1", "1.5", "1e9", "abc", "", "GB", "GiB", "3", "1000",
          "1001", "q8_0", "1,8,64", " 7 ", "nan", "--json", "-x", "=", "H100=x"]


def _options(name: str) -> list[tuple[str, bool]]:
    """(flag, takes a value) of the command's options, as click builds them."""
    spec, row = SPECS[name], BY_NAME[name]
    positional = row.argument if spec.argument else None
    out = []
    for f in describe(row.input_type()):
        if f.name in spec.skip or f.name == positional or f.kind == "dict":
            continue
        if f.kind == "bool":
            out += [(f.flag, False), (f"--no-{f.flag[2:]}", False)]
        else:
            out.append((f.flag, True))
    out += [(d.flag, True) for d in spec.display if isinstance(d, Display)]
    return [*out, ("--json", False)]


def _click_values(name: str, args: list[str]) -> dict | None:
    command = build_command(SPECS[name])
    try:
        with command.make_context(name, list(args)) as ctx:
            return dict(ctx.params)
    except (click.ClickException, click.exceptions.Exit):
        return None


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_plain_lines_read_as_click_reads_them(name):
    __import__(f"cardfit.cli.{modules()[name]}")
    rng = random.Random(name)
    options = _options(name)
    read_plain = 0
    for _ in range(300):
        args: list[str] = []
        for _ in range(rng.randint(0, 6)):
            roll = rng.random()
            if roll < 0.15:
                args.append(rng.choice(VALUES[:3]))  # the positional argument (or a second one)
            elif roll < 0.2:
                args.append(rng.choice(["--", "-h", "--nope", "--gpu-", "-"]))
            else:
                flag, takes = rng.choice(options)
                if not takes:
                    args.append(flag if rng.random() < 0.9 else f"{flag}=1")
                elif rng.random() < 0.3:
                    args.append(f"{flag}={rng.choice(VALUES)}")
                else:
                    args += [flag, rng.choice(VALUES)] if rng.random() < 0.95 else [flag]
        ours = read(name, args)
        if ours is None:
            continue
        read_plain += 1
        theirs = _click_values(name, args)
        assert theirs is not None, args
        assert repr(sorted(ours.items())) == repr(sorted(theirs.items())), args  # repr: nan == nan
    if all(isinstance(d, Display) for d in SPECS[name].display):
        assert read_plain > 50, read_plain
    else:
        assert read_plain == 0  # a click.Option display (validate --all): click reads every line


def test_the_readme_question_reads_without_click():
    __import__("cardfit.cli.plan_cmd")
    args = ["llama3.1:8b", "--gpu", "RTX 4090"]
    assert read("plan", args) == _click_values("plan", args)
    assert read("plan", ["llama3.1:8b", "--gpu"]) is None  # click's "requires an argument"
    assert read("plan", ["--help"]) is None and read("plan", ["--top", "0"]) is None


def test_version_without_click_is_clicks_answer(run_cli):
    """`cardfit --version` answers on the plain path (no click, no package metadata) with click's line for
    the version option, and that version is the installed package's (pyproject.toml reads __version__)."""
    import subprocess
    import sys
    from importlib.metadata import version

    from click.testing import CliRunner

    import cardfit
    from cardfit.cli.app import cli

    clicks = CliRunner().invoke(cli, ["--version"], prog_name="cardfit")
    assert clicks.exit_code == 0
    code, out, err = run_cli("--version")
    assert (code, out, err) == (0, clicks.output, "")
    assert out == f"cardfit, version {cardfit.__version__}\n" and cardfit.__version__ == version("cardfit")
    probe = "import sys; from cardfit.cli import _run; _run(['--version']); print('click' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout == out + "False\n"  # answered without importing click
