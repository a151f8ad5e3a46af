"""Issue 24: a deployment's --max-num-seqs sizes its memory as vLLM's profile run does, in every path that
builds one (plan, a pinned deploy, each pool of a pinned disaggregated deploy, speed's deployed rows).

vLLM's profile run, which sizes the KV pool, pushes max_num_batched_tokens tokens through the model as
min(tokens, max_num_seqs) dummy requests and samples one row of logits for each of them: max_num_seqs is the
server's --max-num-seqs where given, else its default for the card (1,024 on an H100)
(vllm/v1/worker/gpu_model_runner.py profile_run -> _dummy_run: `num_reqs = min(num_tokens, max_num_reqs)`,
`max_num_reqs = self.scheduler_config.max_num_seqs` -> _dummy_sampler_run over their last hidden states; the
same code at v0.11.2 and v0.22.0; vllm/engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args
keeps a given max_num_seqs). Before the fix a pinned deploy sized that run at the card's default whatever
--max-num-seqs said (services/deploy.py timed), so natoscott's L40S pools (--max-num-seq 1024) came out
13-22 % above the report's allocation table and llm-d's gpt-oss-120b pools (--max-num-seqs 512) 2.88 GB
short (docs/VALIDATION.md, "deploy's --max-num-seqs and the KV pool")."""

from __future__ import annotations

from cardfit.services.deploy import DeployInput, pinned_answer

from .helpers import option_for, plan_of

# runtimes.toml vllm sampler_bytes_per_logit (28 B a logit at the sampler's peak, V1); Llama 3.1's vocabulary
LOGIT = 28
VOCAB = 128_256
LLAMA = dict(model="meta-llama/Llama-3.1-8B", runtime="vllm", gpu="H100 SXM")


def _plan_need(**kw) -> int:
    return option_for(plan_of(**LLAMA, context=2000, **kw), "H100 SXM").need_bytes


def _deploy(**kw) -> DeployInput:
    base = dict(model=LLAMA["model"], runtime="vllm", gpu=("H100 SXM",), tp=1, input_tokens=1500,
                output_tokens=500, users=8.0)
    return DeployInput(**{**base, **kw})


def test_plan_memory_follows_the_profile_runs_sampler_rows():
    """256 sequences instead of an H100's 1,024 default: 768 fewer rows of 128,256 logits at 28 B."""
    default, capped = _plan_need(), _plan_need(max_num_seqs=256)
    assert default - capped == (1024 - 256) * VOCAB * LOGIT


def test_pinned_deploy_memory_is_the_plans_with_the_same_cap():
    """The pinned deployment's memory is `cardfit plan`'s for the same settings, cap given or not (it was
    the default-cap memory whatever --max-num-seqs said)."""
    for cap in (None, 64, 512):
        got = pinned_answer(_deploy(max_num_seqs=cap)).result.cand.option.need_bytes
        assert got == _plan_need(max_num_seqs=cap), cap
    assert pinned_answer(_deploy(max_num_seqs=64)).result.cand.option.need_bytes < \
        pinned_answer(_deploy()).result.cand.option.need_bytes


def test_pinned_deploy_pool_grows_with_a_smaller_cap():
    """The same bytes come back as KV pool tokens (131,072 B a token for Llama 3.1 8B in BF16), while the
    sampler's rows are the profile run's peak (at 64 rows the 8,192-token forward pass is: no row counts);
    from vLLM 0.34 the margin of 0.75 x that peak too, where the measured arm binds (extensible_kv_cache.py
    lines 64-65, 592-618): about 1.75 x the rows' bytes (deploy's error bar on the workspace moves too)."""
    full = pinned_answer(_deploy(runtime="vllm@0.33.0")).result.cand.kv_tokens
    capped = pinned_answer(_deploy(max_num_seqs=512, runtime="vllm@0.33.0")).result.cand.kv_tokens
    assert abs((capped - full) * 131_072 - (1024 - 512) * VOCAB * LOGIT) < 16 * 131_072  # a block of 16
    full = pinned_answer(_deploy()).result.cand.kv_tokens
    capped = pinned_answer(_deploy(max_num_seqs=512)).result.cand.kv_tokens
    assert 1.65 < (capped - full) * 131_072 / ((1024 - 512) * VOCAB * LOGIT) < 1.8


def test_each_pool_of_a_pinned_disaggregated_deploy_sizes_its_own_cap():
    """--decode-batch-size 64: the decode workers' engines start with --max-num-seqs 64 and profile 64 rows;
    the prefill workers keep --max-num-seqs 512."""
    p = pinned_answer(_deploy(prefill_workers=1, decode_workers=1, max_num_seqs=512, decode_batch_size=64))
    assert p.pools is not None
    assert p.pools.prefill.cand.option.need_bytes == _plan_need(max_num_seqs=512)
    assert p.pools.decode.cand.option.need_bytes == _plan_need(max_num_seqs=64)


def test_speeds_deployed_rows_time_the_memory_its_own_plan_sizes():
    """`cardfit speed --max-num-seqs N` times each row as the pinned deploy of its users (speed.py
    _deployed_row): that deployment's memory is the one speed's own plan sizes with the same cap."""
    from cardfit.services.speed import SpeedInput, _deploy_question, deployed, engine_checked, setup

    for cap in (None, 64, 512):
        inp = engine_checked(SpeedInput(model=LLAMA["model"], runtime="vllm", gpu="H100 SXM",
                                        input_tokens=1500, output_tokens=500, max_num_seqs=cap))
        s = setup(inp)
        assert deployed(s, inp)
        mine = s.card.option.need_bytes
        assert pinned_answer(_deploy_question(s, inp, 8)).result.cand.option.need_bytes == mine, cap
