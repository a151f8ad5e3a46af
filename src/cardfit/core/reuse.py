"""Reuse in the workload: a prompt prefix every request shares (a system prompt), multi-turn sessions whose
history is sent again each turn, what a prefix cache keeps of it, and a host-RAM tier behind the GPU's KV
pool (KV offload).

A session is `turns` requests. Turn t sends the history of the turns before it (their prompts and answers,
(t − 1) × (I + O) tokens) and I new tokens (the first turn's begin with the `shared_prefix_tokens` N every
session shares), and gets O answer tokens. Over a session, per request (means over its turns):

- prompt tokens sent:            I + (T − 1) (I + O) / 2
- tokens a prefix cache can hit: N / T + (T − 1) (I + O) / 2   (turn 1: the shared prefix; turn t > 1: its
  whole history, the shared prefix inside it)

A runtime with prefix caching (vLLM's automatic prefix caching, SGLang's RadixAttention, TensorRT-LLM's KV
block reuse: data/runtimes.toml prefix_caching) prefills only the tokens it does not hit; the rest it finds
in its KV pool, where the shared prefix's blocks are held once for every sequence using them. What stays
cached is what the pool has room for beside the running sequences: the shared prefix (every request reads
it: never the least recently used) and the histories of the sessions waiting for their next turn. With
equal reuse of every waiting history, an LRU cache of C tokens over W tokens of histories hits C / W of them
(the independent reference model: R. Fagin, "Asymptotic miss ratios over independent references", J.
Computer and System Sciences 14(2), 1977; with equal popularities every item is resident with probability
C / W).

A host tier (vLLM's native CPU offload and LMCache, SGLang HiCache's L2, llama.cpp's host KV) keeps a copy
of the blocks the GPU computed: it is inclusive, so the histories it can serve are those of the larger of
the two tiers, and it adds hits only when it is larger than the GPU's room for them (LMCache docs, "CPU
offloading helps only if the CPU cache is larger than the GPU's prefix cache"; AWS Neuron vLLM guide, "A host
tier that is not larger than HBM adds few hits"). A block found on the host is copied over the card's host
link instead of being computed again."""

from __future__ import annotations

from enum import StrEnum

from ..catalog.records import record

# One direction of a ×16 PCIe link, GB/s (PCI-SIG base specifications: 8, 16, 32, 64 GT/s per lane, 128b/130b
# encoding for Gen3-5 (×16: 15.75, 31.5, 63.0 GB/s); Gen6 64 GT/s PAM4 with FLIT encoding, 121 GB/s),
# the host link of a card whose catalog row gives its PCIe generation but no PCIe link figure of its own.
# A ceiling: vLLM's offloading connector measured "up to about 50GB/s" one way on an H100's PCIe 5.0 x16
# (vLLM blog 2025-12-29, "Inside vLLM's New Offloading Connector"), so host copies are timed ~25 % fast.
PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


@record(slots=True)
class Reuse:
    shared_prefix_tokens: int = 0  # N: the first tokens of every session's first prompt, the same for all
    turns: int = 1  # T: requests per session; each sends the history before it again


def prompt_tokens(i: int, o: int, reuse: Reuse) -> float:
    """The mean prompt a request sends: its I new tokens and its session's history so far."""
    return i + (reuse.turns - 1) * (i + o) / 2


def reusable_tokens(i: int, o: int, reuse: Reuse) -> float:
    """The mean prompt tokens per request a prefix cache that keeps everything would serve."""
    return min(reuse.shared_prefix_tokens, i) / reuse.turns + (reuse.turns - 1) * (i + o) / 2


def history_tokens(i: int, o: int, reuse: Reuse) -> float:
    """The mean history a session waiting for its next turn keeps cached: t (I + O) after turn t, for the
    turns 1 … T − 1 that another follows (none for single requests)."""
    return reuse.turns * (i + o) / 2 if reuse.turns > 1 else 0.0


def held_tokens(i: int, o: int, reuse: Reuse, shared_once: bool) -> float:
    """The KV tokens a decoding sequence holds on average (its prompt and half its answer), the shared prefix
    left out where the pool holds it once for every sequence (`shared_once`: prefix caching)."""
    held = prompt_tokens(i, o, reuse) + o // 2
    return held - min(reuse.shared_prefix_tokens, i) if shared_once else held


def lru_hit_share(capacity: float, working_set: float) -> float:
    """The share of `working_set` tokens, reused equally, that an LRU cache of `capacity` tokens still
    holds when asked (Fagin 1977, module docstring)."""
    if working_set <= 0:
        return 1.0
    return min(max(capacity, 0.0) / working_set, 1.0)


@record(slots=True)
class Hits:
    """What a request finds cached, in tokens per request (means over a session's turns)."""

    gpu_tokens: float  # found in the GPU's KV pool: not computed
    host_tokens: float  # found only in the host tier: copied over the host link, not computed
    reusable_tokens: float  # what a cache that kept everything would have served

    @property
    def cached_tokens(self) -> float:
        return self.gpu_tokens + self.host_tokens

    @property
    def hit_rate(self) -> float:
        """Hits over what could be hit (1: the cache keeps the whole reuse)."""
        return self.cached_tokens / self.reusable_tokens if self.reusable_tokens else 0.0


def hits(i: int, o: int, reuse: Reuse, *, pool_tokens: float, running: float, sessions: float,
         host_tokens: float = 0.0) -> Hits:
    """The prefix-cache hits of a replica whose KV pool holds `pool_tokens` while `running` sequences decode
    and `sessions` sessions (running or waiting for their next turn) keep a history; `host_tokens`: the
    host tier's size. The shared prefix hits while the pool holds it; the histories of the waiting sessions
    share what the running sequences leave (lru_hit_share), or the host tier where larger (inclusive)."""
    shared = min(reuse.shared_prefix_tokens, i)
    whole = reusable_tokens(i, o, reuse)
    if whole <= 0:
        return Hits(0.0, 0.0, 0.0)
    shared_hit = shared / reuse.turns if pool_tokens >= shared else 0.0
    history = whole - shared / reuse.turns  # per request: the hits turns 2 … T can take from their history
    waiting = max(sessions - running, 0.0) * history_tokens(i, o, reuse)
    room = pool_tokens - shared - running * held_tokens(i, o, reuse, True)
    gpu_share = lru_hit_share(room, waiting)
    host_share = max(lru_hit_share(host_tokens, waiting) - gpu_share, 0.0)
    return Hits(shared_hit + history * gpu_share, history * host_share, whole)


def host_link_gbps(pcie_gen: int | None, interconnect: str, link_gbps: float | None) -> float | None:
    """The card's host link, GB/s one way: its own PCIe figure where the catalog's link is PCIe, else a ×16
    link of its PCIe generation (PCIE_X16_GBPS); None when the catalog gives neither."""
    if interconnect == "pcie" and link_gbps:
        return link_gbps
    return PCIE_X16_GBPS.get(pcie_gen) if pcie_gen else None


def host_load_s(tokens: float, kv_bytes_per_token: float, link_gbps: float) -> float:
    """Seconds to copy `tokens` tokens of KV cache from host RAM over a link of `link_gbps` GB/s."""
    return tokens * kv_bytes_per_token / (link_gbps * 1e9) if link_gbps > 0 else 0.0


class OffloadReason(StrEnum):
    """Whether a host KV tier helps a workload on a replica, and why (offload_reason)."""

    HELPS = "helps"  # it serves reused tokens the GPU pool lost, faster than computing them again
    NO_REUSE = "no_reuse"  # the workload reuses no prompt tokens (no shared prefix, one turn)
    GPU_HOLDS = "gpu_holds"  # the GPU pool already keeps every reused token
    NOT_LARGER = "not_larger"  # the host tier is not larger than the GPU pool's room: an inclusive copy adds
    # no hit
    SLOWER = "slower"  # copying a token over the host link takes longer than computing it again


def offload_reason(h: Hits, gpu_only: Hits, copy_s_per_token: float, recompute_s_per_token: float
                   ) -> OffloadReason:
    """Whether the host tier helps: `h` the hits with it, `gpu_only` without it; a hit from the host costs
    `copy_s_per_token` where computing the token costs `recompute_s_per_token`."""
    if gpu_only.reusable_tokens <= 0:
        return OffloadReason.NO_REUSE
    if gpu_only.gpu_tokens >= gpu_only.reusable_tokens * (1 - 1e-9):
        return OffloadReason.GPU_HOLDS
    if h.host_tokens <= 0:
        return OffloadReason.NOT_LARGER
    if copy_s_per_token >= recompute_s_per_token:
        return OffloadReason.SLOWER
    return OffloadReason.HELPS


OFFLOAD_WHY = {
    OffloadReason.HELPS: "it keeps session histories the GPU pool has no room for, and copying them back "
                         "over the host link is faster than computing them again",
    OffloadReason.NO_REUSE: "the workload reuses no prompt tokens (give --shared-prefix-tokens or "
                            "--turns): there is nothing to keep",
    OffloadReason.GPU_HOLDS: "the GPU's KV pool already keeps every reused token",
    OffloadReason.NOT_LARGER: "the host tier is not larger than the GPU pool's room for cached tokens: it "
                              "holds copies of what the GPU holds and adds no hit (LMCache: only a host "
                              "cache larger than the GPU's helps)",
    OffloadReason.SLOWER: "copying a token's KV cache over the host link takes longer than computing it "
                          "again",
}
