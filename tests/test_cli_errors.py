"""Bad input gets one line that says what to do, a non-zero exit, and never a traceback."""

from __future__ import annotations

import pytest

SHAPE = ["--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128"]

# a pinned deployment timed with a benchmark run (services/pinned.py length_law)
PIN = ["deploy", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--users", "8", "--tp", "1"]

CASES = [
    (["plan", "--params", "-5", "--layers", "32", "--kv-heads", "8", "--head-dim", "128"],
     "--params must be greater than 0"),
    (["plan", "no-such-model-xyz"], "unknown model 'no-such-model-xyz'"),
    (["plan", "llama3.1:8c"], "did you mean"),
    (["plan", "llama3.1:8b", "--gpu", "RTX 4900"], "did you mean RTX 4090"),
    (["plan", "llama3.1:8b", "--gpu", "RTX 9999"], "unknown GPU 'RTX 9999'"),
    (["plan", "llama3.1:8b", "--context", "-1"], "--context must be greater than or equal to 1"),
    (["plan", "llama3.1:8b", "--context", "99999999999"], "--context must be less than or equal to"),
    (["plan", "llama3.1:8b", "--quant", "q4_k_x"], "unknown quantization 'q4_k_x'"),
    (["plan", "llama3.1:8b", "--runtime", "vllmm"], "unknown runtime 'vllmm'; did you mean vllm?"),
    (["plan", "llama3.1:8b", "--kv-dtype", "fp7"], "unknown KV cache type 'fp7'"),
    (["plan", "llama-3.1-8b", "--context", "200000"], "beyond Llama 3.1 8B's trained maximum of 131,072"),
    (["plan", *SHAPE[:4]], "a bare shape needs --kv-heads, --head-dim as well"),
    (["plan", "llama3.1:8b", "--batch", "2", "--parallel", "3"], "give one"),
    (["plan", "llama3.1:8b", "--gpu-memory-utilization", "1.5"],
     "--gpu-memory-utilization must be less than or equal to 1"),
    (["plan", "llama3.1:8b", "--catalog", "/nonexistent/cards.toml"], "cannot read catalog file"),
    (["plan", "llama3.1:8b", "--params"], "requires an argument"),
    (["max-context", "llama3.1:8b"], "this question needs --gpu"),
    (["plan", "llama-3.1-8b", "--runtime", "vllm", "--kv-dtype", "q8_0"], "vLLM has no 'q8_0' KV cache"),
    (["plan", "llama-3.1-8b", "--tp", "3", "--runtime", "vllm"], "do not divide by it"),
    (["plan", "llama3.1:8b", "--tp", "2"], "splits a model across cards by layers"),
    (["max-context", "qwen3-next-80b-a3b", "--gpu", "H200", "--runtime", "vllm"], "leaves no room"),
    (["largest-model", "--quant", "Q4_K_M"], "largest-model needs --gpu"),
    (["plan", "llama3.1:8b", "--bogus"], "No such option '--bogus'"),
    # click keeps the last of a repeated single-valued option: the first card would be ignored silently
    (["plan", "llama3.1:8b", "--gpu", "RTX 4090", "--gpu", "RTX 3090"],
     "'--gpu': given 2 times (RTX 4090, RTX 3090); give it once"),
    (["speed", "llama3.1:8b", "--gpu", "RTX 4090", "--context", "4096", "--context", "8192"],
     "'--context': given 2 times (4096, 8192); give it once"),
    # an engine setting without a pin: the hint repeats the runtime and the value given
    (["deploy", "llama-3.1-8b", "--users", "8", "--runtime", "sglang", "--cuda-graph-max-bs", "64"],
     "e.g. --gpu 'H100 SXM' --runtime sglang --tp 1 --cuda-graph-max-bs 64"),
    # a pinned deployment the engine could not start as asked (services/pinned.py check_pinned)
    (["deploy", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--users", "8", "--tp", "2",
      "--attention-dp", "3"], "--attention-dp 3: the attention groups split the 2 tensor-parallel ranks"),
    (["deploy", "qwen3-30b-a3b", "--gpu", "H100 SXM", "--runtime", "vllm", "--users", "8", "--tp", "2",
      "--attention-dp", "2", "--expert-parallel", "3"], "--expert-parallel 3: the experts are sharded"),
    (["deploy", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--users", "8", "--tp", "2",
      "--expert-parallel", "2"], "--expert-parallel shards a mixture-of-experts model's experts"),
    (["deploy", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--users", "8", "--tp", "1",
      "--input-tokens", "1000", "--output-tokens", "200", "--max-model-len", "1000"],
     "--max-model-len 1,000 is shorter than a request (1,000 + 200 tokens)"),
    # how a benchmark draws its lengths (services/pinned.py length_law, parse_distribution)
    ([*PIN, "--requests", "8", "--length-distribution", "gauss"],
     "--length-distribution 'gauss': give sharegpt, exponential, uniform:RATIO"),
    ([*PIN, "--requests", "8", "--length-distribution", "uniform:1.5"],
     "the uniform law's ratio is a number from 0 to 1"),
    ([*PIN, "--requests", "8", "--length-distribution", "uniform:nan"],
     "the uniform law's ratio is a number from 0 to 1"),
    ([*PIN, "--requests", "8", "--length-distribution", "sonnet:0.2"], "sonnet takes no ratio"),
    ([*PIN, "--length-distribution", "uniform:0.1"],
     "--length-distribution describes a benchmark run: give --requests N"),
    (["deploy", "llama-3.1-8b", "--users", "8", "--length-distribution", "sonnet"],
     "--length-distribution applies to one pinned deployment: add --tp"),
    ([*PIN, "--requests", "8", "--max-output-tokens", "300"],
     "--max-output-tokens caps answers that vary in length: give --random-lengths"),
    ([*PIN, "--requests", "8", "--random-lengths", "--output-tokens", "200", "--max-output-tokens", "100"],
     "--output-tokens 200 is the answers' mean: it cannot exceed"),
    ([*PIN, "--requests", "8", "--length-distribution", "sonnet", "--input-tokens", "1000",
      "--output-tokens", "100", "--max-output-tokens", "300", "--max-model-len", "1200"],
     "a request of 1,000 prompt tokens and max_tokens 300 exceeds the context of 1,200 tokens"),
    ([*PIN, "--requests", "8", "--random-lengths", "--input-tokens", "130000", "--output-tokens", "2000"],
     "exceeds the context of 131,072 tokens"),
    # stack files are TOML or YAML (tests/test_stack_yaml.py holds the bad YAML files)
    (["stack", "--model", "qwen3:8b", "--gpu", "RTX 4090", "--format", "json"],
     "--format must be 'toml' or 'yaml' (got 'json')"),
    (["stack", "--model", "qwen3:8b", "--gpu", "RTX 4090", "--format", "yaml"],
     "--format is the stack file's; --model needs none"),
    # the engine settings: one definition (services/inputs.py ENGINE_OPTIONS), one error line in each command
    (["speed", "llama-3.1-8b", "--gpu", "H100", "--max-prefill-tokens", "0"],
     "--max-prefill-tokens must be greater than or equal to 1"),
    (["deploy", "llama-3.1-8b", "--users", "8", "--max-prefill-tokens", "0"],
     "--max-prefill-tokens must be greater than or equal to 1"),
    (["speed", "llama-3.1-8b", "--gpu", "H100", "--attention-dp", "2"],
     "--attention-dp sets the engine of a served load: give --input-tokens"),
    (["speed", "llama-3.1-8b", "--gpu", "H100", "--max-num-batched-tokens", "4096",
      "--prefill-chunk", "2048"],
     "--max-num-batched-tokens and --prefill-chunk are one setting"),
    # the --batch asked for, not the weights, leaves no room: the line says so and what to lower
    (["max-context", "llama-3.1-8b", "--gpu", "RTX 4090", "--batch", "1000", "--runtime", "vllm"],
     "Llama 3.1 8B at BF16 leaves no room for even one token of context for each of 1,000 sequences on 1x "
     "RTX 4090: at one token each they need 29.1 GB of a 23.5 GB budget (vllm; weights and workspace 18.0 "
     "GB); give fewer sequences (--batch)"),
    # a repeatable option given a blank value: the line a blank single one gets
    (["deploy", "llama-3.1-8b", "--users", "8", "--gpu", ""], "--gpu is empty; give a value or leave it out"),
    (["deploy", "llama-3.1-8b", "--users", "8", "--gpu", "H100 SXM", "--gpu", " "], "--gpu is empty"),
    # a GGUF build asked of a checkpoint runtime (and the reverse): why, and the name to pass, not "no runtime
    # serves this model" (services/deploy.py _format_mismatch)
    (["deploy", "llama3.1:8b", "--users", "10", "--runtime", "vllm"],
     "cardfit plans vLLM on checkpoints, not an Ollama tag (Q4_K_M, a GGUF build): deploy runs GGUF builds "
     "on llama.cpp and Ollama; name the checkpoint (meta-llama/Llama-3.1-8B-Instruct) to serve Llama 3.1 8B "
     "on vllm"),
    (["deploy", "llama-3.1-8b", "--users", "10", "--runtime", "sglang", "--quant", "Q4_K_M"],
     "on checkpoints, not Q4_K_M (a GGUF build)"),
    (["deploy", "llama-3.1-8b", "--users", "10", "--runtime", "ollama", "--quant", "fp8"],
     "Ollama serves GGUF builds, not FP8 (E4M3); pass a GGUF --quant"),
]


@pytest.mark.parametrize("args,message", CASES)
def test_bad_input_one_line(run_cli, args, message):
    code, out, err = run_cli(*args)
    assert code == 2, err  # 2: the user's input; 1 would be an internal error
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: ")
    assert message in lines[0]
    assert out == ""


def test_bad_input_json_mode_prints_nothing_on_stdout(run_cli):
    code, out, err = run_cli("plan", "no-such-model-xyz", "--json")
    assert code == 2 and out == "" and err.startswith("Error: unknown model")


def test_broken_user_catalog(run_cli, tmp_path):
    bad = tmp_path / "cards.toml"
    bad.write_text("[[gpu]]\nid = 'x'\nname = \n")
    code, _, err = run_cli("plan", "llama3.1:8b", "--catalog", str(bad))
    assert code == 2 and "not valid TOML" in err and str(bad) in err


def test_duplicate_id_in_user_catalog_is_an_error(run_cli, tmp_path):
    f = tmp_path / "cards.toml"
    f.write_text(
        '[[gpu]]\nid = "rtx-4090"\nname = "My 4090"\nvendor = "nvidia"\nusable_bytes = 25000000000\n'
    )
    code, _, err = run_cli("gpus", "--catalog", str(f))
    assert code == 2 and "already exists; add `override = true`" in err
