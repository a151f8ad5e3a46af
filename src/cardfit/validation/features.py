"""The production features a validation record's question uses (issue 26: attention data parallel and expert
parallel, disaggregated prefill/decode pools, speculative decoding, a host KV tier, prefix reuse), read off
the question itself: the deploy question a serving record answers (validation/serving.py record_input) or the
speed question of a decode, prefill or aggregate record (validation/single.py record_input), never the
record's id. `cardfit validate` prints its errors per feature from these tags (validate.py feature_splits)."""

from __future__ import annotations

from typing import Any

from ..errors import CardfitError
from ..services.deploy import FEATURES, DeployInput, features, pd_pinned, pool_shape

__all__ = ("FEATURES", "FEATURE_MEANS", "QUESTION_KINDS", "question_features", "record_features")

# The features (services/deploy.py FEATURES, in the order `validate` prints them), and what puts a question
# in each (the options a user passes to deploy or speed):
FEATURE_MEANS = {
    "dp_ep": "--attention-dp > 1 and/or --expert-parallel > 1 (a P/D pool's --prefill-dp / --decode-dp too)",
    "disaggregated": "--prefill-workers and --decode-workers (P/D pools)",
    "speculative": "--speculative (a draft model, EAGLE, MTP or n-gram)",
    "kv_offload": "--kv-offload-gb > 0 (a host KV tier)",
    "prefix_reuse": "--shared-prefix-tokens > 0 or --turns > 1 (prefix groups, multi-turn sessions)",
}
# The record kinds whose question can ask for a feature: a served load (deploy) and a speed row (speed)
QUESTION_KINDS = ("serving", "decode", "prefill", "aggregate_decode")


def question_features(q: Any) -> tuple[str, ...]:
    """The features a deploy or speed question (services/deploy.py DeployInput, services/speed.py SpeedInput)
    asks for, in FEATURES order (services/deploy.py features, the rule deploy tags its candidates by); ()
    for a question that asks for none."""
    pools = isinstance(q, DeployInput) and pd_pinned(q)
    # a pool's attention groups (--prefill-dp, --decode-dp, else --attention-dp), its experts then over all
    # its ranks (services/deploy.py check_pools)
    groups = [pool_shape(q, role)[2] for role in ("prefill", "decode")] if pools else []
    def given(name: str) -> Any:  # a speed question lacks the pools' options and reads none as unset
        return getattr(q, name, None)

    return features(max([int(given("attention_dp") or 1), *groups]), given("expert_parallel"), pools,
                    bool(given("speculative")), given("kv_offload_gb"), given("shared_prefix_tokens"),
                    given("turns"))


def record_features(r: dict[str, Any]) -> tuple[str, ...]:
    """The features of the question a validation record is scored as (question_features); () for a memory
    record, and for a record whose question cannot be built (it is skipped when scored, with its reason)."""
    from .serving import record_input as deploy_question
    from .single import record_input as speed_question

    kind = r.get("kind")
    if kind not in QUESTION_KINDS:
        return ()
    try:
        q = deploy_question(r)[0] if kind == "serving" else speed_question(r)
    except (CardfitError, ValueError):  # a bug (TypeError, KeyError, ...) must not silently untag a record
        return ()
    return question_features(q)


def expert_parallel_asked_tp(r: dict[str, Any], tags: tuple[str, ...] | None = None) -> bool:
    """Whether a record ran its experts expert-parallel (`moe_ep` > 1 in its settings) but its question asks
    for them tensor-parallel (no dp_ep tag: deploy's --expert-parallel goes with --attention-dp,
    validation/serving.py expert_parallel), so it is not counted as dp_ep. `tags`: its record_features where
    already read."""
    if int((r.get("settings") or {}).get("moe_ep") or 1) <= 1:
        return False
    return "dp_ep" not in (record_features(r) if tags is None else tags)
