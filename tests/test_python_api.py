"""`import cardfit`: each function takes the command's options as keywords and returns its --json data."""

from __future__ import annotations

import pytest

import cardfit


def test_plan_equals_cli_json(run_json):
    assert cardfit.plan("llama3.1:8b", gpu="RTX 4090") == run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090")


def test_every_command_has_a_function(run_json):
    # the break-even guide's worked example
    assert cardfit.breakeven(hourly=0.5, tokens_per_s=400, api_price=[15], hours_per_month=730)["apis"][0][
        "breakeven_millions_per_month"] == pytest.approx(24.333, abs=1e-3)
    assert cardfit.max_context("llama3.1:8b", gpu="RTX 4090") == run_json("max-context", "llama3.1:8b",
                                                                          "--gpu", "RTX 4090")
    assert (
        cardfit.max_sequences("llama-3.1-8b", gpu="H100", context=8192, runtime="vllm")["max_sequences"] > 1
    )
    assert cardfit.largest_model(gpu="RTX 4090", quant="Q4_K_M")["largest"]
    assert cardfit.finetune("shape-7b", method="full", flat_activations=True)["memory"]["total_bytes"] > 112e9
    assert cardfit.speed("llama-3.1-8b", gpu="H100", context=8192)["rows"][0]["concurrency"] == 1
    assert cardfit.validate("file_size")["kinds"]["file_size"]["n"] >= 60


def test_bad_input_raises_one_error_type():
    with pytest.raises(cardfit.CardfitError, match="unknown GPU"):
        cardfit.plan("llama3.1:8b", gpu="RTX 9999")
    with pytest.raises(ValueError):  # every cardfit input error is also a ValueError
        cardfit.plan("llama3.1:8b", context=-1)
