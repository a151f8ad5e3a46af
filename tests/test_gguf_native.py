"""A name resolves to what its runtime's users fetch (issue 25 item 3, issue 24's gpt-oss direction): with no
--quant, llama.cpp plans gpt-oss as ggml-org's GGUF, file type MXFP4_MOE (experts MXFP4, attention, embedding
and head Q8_0: data/gguf_mixes.toml), not the checkpoint's MXFP4 with BF16 attention. llama.cpp's gpt-oss
guide (https://github.com/ggml-org/llama.cpp/discussions/15396): "The original models provided by OpenAI ...
First, you need to manually convert them to GGUF format. For convenience, we host pre-converted models here
in ggml-org"; PR #15091: "llama-server -hf ggml-org/gpt-oss-120b-GGUF". The table is data
(runtimes.toml `native_gguf`), read by one owner (services/resolve.py Resolved.native_file). Ollama pulls its
own gpt-oss blobs (BF16 attention) and keeps MXFP4; `--quant mxfp4` keeps the checkpoint's format."""

from __future__ import annotations

import pytest

from cardfit.catalog.runtimes import default_runtimes
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import build_context
from cardfit.services.speed import SpeedInput, speed_report

NOTE = ("llama.cpp (llama-server / llama-cli) loads a GGUF file: planned for the MXFP4_MOE file its users "
        "download for this MXFP4 checkpoint; --quant mxfp4 plans the checkpoint's own tensors")


def _quant(**kw) -> str:
    return build_context(PlanInput(**kw)).quant.name


def test_llamacpp_plans_ggml_orgs_mxfp4_moe_file_for_gpt_oss():
    ctx = build_context(PlanInput(model="gpt-oss-20b", runtime="llama.cpp", gpu="RTX 4090"))
    assert ctx.quant.name == "MXFP4_MOE"
    assert NOTE in ctx.notes
    assert _quant(model="gpt-oss-120b", runtime="llama.cpp") == "MXFP4_MOE"
    # an Apple card: planned for llama.cpp (Metal), which loads the same file
    assert _quant(model="gpt-oss-20b", gpu="Apple M4 Pro 24GB") == "MXFP4_MOE"


@pytest.mark.parametrize(("kw", "quant"), [
    ({"runtime": "llama.cpp", "quant": "mxfp4"}, "MXFP4"),  # asked for: the checkpoint's own tensors
    ({"runtime": "ollama"}, "MXFP4"),  # Ollama's own gpt-oss blob (BF16 attention)
    ({}, "MXFP4"),  # no runtime: the checkpoint, for vLLM
    ({"runtime": "vllm"}, "MXFP4"),
])
def test_the_others_keep_the_checkpoints_mxfp4(kw, quant):
    assert _quant(model="gpt-oss-20b", **kw) == quant


def test_a_tag_names_its_own_weights():
    """An Ollama tag is Ollama's blob, whatever runtime loads it."""
    assert _quant(model="gpt-oss:20b") == _quant(model="gpt-oss:20b", runtime="llama.cpp") == "MXFP4"


def test_only_llamacpp_has_the_table():
    rows = {r.id: dict(r.native_gguf) for r in default_runtimes()}
    assert rows["llama.cpp"] == {"mxfp4": "MXFP4_MOE"}
    assert rows["ollama"] == {}
    assert "15396" in default_runtimes().get("llama.cpp").native_gguf_source


# ggml-org/llama.cpp PR tables on an RTX 4090, llama-bench `gpt-oss 20B MXFP4 MoE` tg128, column master:
# #16649 (am17an, 2025-10-18) 167.01 tok/s, #16834 (2025-10-29) 186.10 (validation speed_llamacpp_prs.toml)
PR_4090_TG128 = (167.01, 186.10)


def test_plain_speed_is_the_file_the_pr_tables_measure():
    """`cardfit speed gpt-oss-20b --runtime llama.cpp --gpu "RTX 4090"`: 190.9 tok/s at tg128 (+14 % /
    +2.6 % of the two masters, with llama.cpp's per-layer time refitted on them among the rest: 185.3 before
    the 2026-12-07 refit with llama.cpp #26663's HIP rows, 117.8 -> 111.2 us a layer); the checkpoint's MXFP4
    (3.71 GB a token) was 145.4 before the first refit, -13 % / -22 %."""
    def tps(quant: str | None) -> dict:
        return speed_report(SpeedInput(model="gpt-oss-20b", gpu="RTX 4090", runtime="llama.cpp", quant=quant,
                                       context=128, filled=64)).to_json()

    plain, mix = tps(None), tps("MXFP4_MOE")
    assert plain["quant"] == "MXFP4_MOE"
    assert plain["decode_tokens_per_s"] == mix["decode_tokens_per_s"] == pytest.approx(190.9, abs=0.1)
    lo, hi = PR_4090_TG128
    assert 0.97 * hi <= plain["decode_tokens_per_s"] <= 1.15 * lo
    assert tps("mxfp4")["decode_tokens_per_s"] < lo  # the checkpoint's format: slower than both masters


def test_every_command_answers_the_same_file():
    from cardfit.services.deploy import DeployInput, settings
    from cardfit.services.inputs import MaxContextInput
    from cardfit.services.reverse import max_context

    r = max_context(MaxContextInput(model="gpt-oss-20b", runtime="llama.cpp", gpu="RTX 4090"))
    assert r.quant == "MXFP4_MOE"
    # deploy's search over runtimes x quants: llama.cpp serves the GGUF file (before: MXFP4, which deploy
    # leaves to the checkpoint runtimes, so `deploy gpt-oss-20b --runtime llama.cpp` found no runtime)
    sets, _ = settings(DeployInput(model="gpt-oss-20b", users=4, gpu=("RTX 4090",)))
    pairs = {(s.ctx.runtime.id, s.ctx.quant.name) for s in sets}
    assert ("llama.cpp", "MXFP4_MOE") in pairs and ("vllm", "MXFP4") in pairs
    assert not any(q == "MXFP4" for rt, q in pairs if rt == "llama.cpp")
    sets, _ = settings(DeployInput(model="gpt-oss-20b", users=4, gpu=("RTX 4090",), runtime="llama.cpp"))
    assert {s.ctx.quant.name for s in sets} == {"MXFP4_MOE"}


def test_the_cli_names_the_file_type():
    from click.testing import CliRunner

    from cardfit.cli.app import cli

    def out(*args: str) -> str:
        res = CliRunner().invoke(cli, list(args), prog_name="cardfit")
        assert res.exit_code == 0, res.output
        return res.output

    assert out("max-context", "gpt-oss-20b", "--runtime", "llama.cpp", "--gpu", "RTX 4090").strip() == (
        "gpt-oss 20B on 1× RTX 4090 (MXFP4_MOE, llama.cpp, KV f16, 1 sequence): up to 131,072 tokens per "
        "sequence (capped by the model's 128K).")
    assert out("speed", "gpt-oss-20b", "--runtime", "llama.cpp", "--gpu", "RTX 4090").startswith(
        "gpt-oss 20B · MXFP4_MOE · llama.cpp ")
    assert out("speed", "gpt-oss-20b", "--runtime", "llama.cpp", "--gpu", "RTX 4090", "--quant",
               "mxfp4").startswith("gpt-oss 20B · MXFP4 · llama.cpp ")


def test_a_checkpoint_on_disk_is_converted_by_its_owner(tmp_path):
    """A config.json of gpt-oss on disk: its owner converts it (convert_hf_to_gguf.py keeps the non-expert
    tensors 16-bit: the checkpoint's MXFP4, as validation's rx7900xt `gpt-oss-20b.auto.gguf` records), so
    llama.cpp plans the checkpoint's format, not ggml-org's file."""
    import json

    from tests.test_readers import GPT_OSS_20B

    (tmp_path / "config.json").write_text(json.dumps(GPT_OSS_20B), encoding="utf-8")
    assert _quant(model=str(tmp_path), runtime="llama.cpp") == "MXFP4"
