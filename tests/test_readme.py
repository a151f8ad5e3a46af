"""The README shows real output: its `cardfit plan` block is what the CLI prints today (100 columns)."""

from __future__ import annotations

import re

import pytest

from .conftest import ROOT


def test_readme_plan_block_is_real_output(run_cli):
    text = (ROOT / "README.md").read_text()
    block = re.search(r'```text\n\$ cardfit plan llama3\.1:8b --gpu "RTX 4090"\n(.*?)```', text, re.S)
    assert block, "README lost its example"
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", env={"COLUMNS": "100"})
    assert code == 0, err
    shown = [line.rstrip() for line in block.group(1).rstrip("\n").split("\n")]
    assert shown == [line.rstrip() for line in out.rstrip("\n").split("\n")]


def test_readme_two_commands_exist():
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    makefile = (ROOT / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_deploy_block_is_real_output(run_cli):
    text = (ROOT / "README.md").read_text()
    cmd = ("cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 32 --ttft-ms 1500 --tpot-ms 50 "
           "--runtime vllm")
    block = re.search(r"```text\n\$ " + re.escape(cmd) + r"\n(.*?)```", text, re.S)
    assert block, "README lost its deploy example"
    code, out, err = run_cli(*cmd.split()[1:], env={"COLUMNS": "100"})
    assert code == 0, err
    shown = [line.rstrip() for line in block.group(1).rstrip("\n").split("\n")]
    assert shown == [line.rstrip() for line in out.rstrip("\n").split("\n")]


STACKS = ["rag-4090", "70b-draft-lora-2xh100", "vision-chat-mac", "llamacpp-3090-3060"]


@pytest.mark.parametrize("name", STACKS)
def test_readme_stack_blocks_are_real_output(run_cli, name):
    """The four example stacks of issue 27, as `cardfit stack` prints them today (100 columns)."""
    text = (ROOT / "README.md").read_text()
    cmd = f"cardfit stack examples/stacks/{name}.toml"
    block = re.search(r"```text\n\$ " + re.escape(cmd) + r"\n(.*?)```", text, re.S)
    assert block, f"README lost its {name} stack"
    code, out, err = run_cli("stack", str(ROOT / "examples" / "stacks" / f"{name}.toml"),
                             env={"COLUMNS": "100"})
    assert code == 0, err
    shown = [line.rstrip() for line in block.group(1).rstrip("\n").split("\n")]
    assert shown == [line.rstrip() for line in out.rstrip("\n").split("\n")]
