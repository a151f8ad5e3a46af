"""Attention data-parallel + expert-parallel placement of a mixture-of-experts model (vLLM
`--data-parallel-size N --enable-expert-parallel`, SGLang `--enable-dp-attention --dp-size N --ep-size N`,
TensorRT-LLM `enable_attention_dp` + `--ep_size`).

On N cards the model runs as `dp` attention groups of `tp` = N / dp cards each: every group holds the
attention and the other non-expert weights (shared experts, dense layers, embeddings, output head) whole,
split over its own tp ranks, and only its own requests' KV cache; the routed experts are sharded over all
EP = dp × tp ranks. A MoE layer sends each token's hidden state to the ranks of its top-k experts and back
(dispatch and combine, an all-to-all), in place of tensor parallel's all-reduces.

Pure arithmetic on numbers: core/speed.py `step` times a layout through Machine.expert_parallel, and
services/deploy.py sizes its memory with `weights_bytes_in_all`."""

from __future__ import annotations

import math

from ..catalog.records import record

# An all-to-all reaches this share of one direction of the card's link. DeepEP's normal kernels move 153 GB/s
# a rank in an 8-rank intranode dispatch (158 combining) on H800, whose NVLink runs 400 GB/s both directions
# together, 200 GB/s each way (deepseek-ai/DeepEP README, "Normal kernels with NVLink and RDMA forwarding":
# https://github.com/deepseek-ai/DeepEP; NVIDIA H800 SXM datasheet): 153 / 200.
ALLTOALL_LINK_SHARE = 153 / 200
# Bytes of each hidden-state element a dispatch or combine moves: BF16 activations both ways (vLLM's
# all2all backends and SGLang's default DeepEP normal mode combine in BF16; DeepEP dispatches in FP8 only
# where the engine asks for it, which the plan does not assume).
ALLTOALL_DTYPE_BYTES = 2


@record(slots=True)
class Layout:
    """A replica of `dp` attention groups of `tp` cards each, its experts sharded over `ep` = dp × tp ranks
    (dp = ep = 1: tensor parallel over tp, today's layout)."""

    dp: int = 1
    tp: int = 1
    ep: int = 1

    @property
    def cards(self) -> int:
        return self.dp * self.tp


def layouts(cards: int) -> list[Layout]:
    """The attention-DP + EP layouts of a MoE replica on `cards` cards of one node: dp attention groups for
    every dp > 1 that divides the cards, each group tensor-parallel over the rest, experts over all cards."""
    return [Layout(dp, cards // dp, cards) for dp in range(2, cards + 1) if cards % dp == 0]


def weights_bytes_in_all(weights_bytes: int, expert_share: float, dp: int) -> int:
    """The weight bytes a layout holds over all its cards: the routed experts once (sharded over EP), every
    other weight once per attention group (dp copies). 0 ≤ expert_share ≤ 1 is the experts' byte share."""
    share = min(max(expert_share, 0.0), 1.0)
    experts = weights_bytes * share
    return round(experts + (weights_bytes - experts) * max(dp, 1))


def alltoall_bytes_per_token(hidden: int, top_k: int, dtype_bytes: int = ALLTOALL_DTYPE_BYTES) -> int:
    """What one MoE layer's dispatch sends for one token (and its combine brings back): the hidden state once
    per expert it is routed to."""
    return hidden * top_k * dtype_bytes


def imbalance(tokens: float, top_k: int, ep: int) -> float:
    """The busiest of `ep` ranks' share of a step's routed tokens over the mean: with routing spread
    uniformly, each rank receives about μ = tokens × top_k / ep of them, and the largest of ep such counts
    exceeds μ by about σ √(2 ln ep), σ² = μ (1 − 1/ep) (the maximum of ep near-normal bin loads: balls into
    bins, Raab & Steger, "Balls into Bins — A Simple and Tight Analysis", RANDOM 1998). Real routing is
    skewed further, which SGLang's EPLB redistributes ("Even with EPLB, a single batch still hits ranks
    unevenly": LMSYS, "Improving DeepEP MoE Load Balance in SGLang with Waterfill and LPLB"); this is the
    floor a balanced placement still pays, 1 for one rank."""
    if ep <= 1 or tokens <= 0 or top_k <= 0:
        return 1.0
    mu = tokens * top_k / ep
    return 1.0 + math.sqrt(2 * math.log(ep) * (1 - 1 / ep) / mu)


def alltoall_seconds(tokens: float, hidden: int, top_k: int, moe_layers: int, ep: int, link_gbps: float,
                     latency_s: float, bidirectional: bool) -> float:
    """A step's dispatch + combine over its MoE layers on the busiest rank: the rank's tokens (tokens / ep,
    each routed to top_k experts) leave it for the ep − 1 other ranks and come back, at
    ALLTOALL_LINK_SHARE of one direction of its link (`bidirectional`: link_gbps counts both directions, as
    NVLink's 900 GB/s does), times the routing imbalance, plus a call's latency each way."""
    if ep <= 1 or moe_layers <= 0 or tokens <= 0:
        return 0.0
    per_rank = tokens / ep * alltoall_bytes_per_token(hidden, top_k) * (ep - 1) / ep
    rate = link_gbps * (0.5 if bidirectional else 1.0) * ALLTOALL_LINK_SHARE * 1e9
    one_way = per_rank * imbalance(tokens, top_k, ep) / rate + latency_s
    return 2 * moe_layers * one_way
