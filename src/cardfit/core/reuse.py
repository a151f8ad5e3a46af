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

Many prefix groups (`prefix_groups` G: SGLang bench_serving's `generated-shared-prefix` dataset,
--gsp-num-groups × --gsp-prompts-per-group; vLLM bench's `prefix_repetition`,
--prefix-repetition-num-prefixes): G prefixes of N tokens each, every request beginning with one of them, the
groups equally popular. Each group's prefix is computed once and held once in the pool while it stays cached,
G × N tokens in all. A prefix some running sequence reads is in the pool (it holds its blocks); the others
compete for what the running sequences leave, reused equally, and an LRU cache keeps the share C / W of them
(Fagin 1977). Both engines evict so: vLLM's automatic prefix caching frees only blocks no running request
references, the least recently used first (vLLM RFC #2614, https://github.com/vllm-project/vllm/issues/2614:
"Only evict the blocks with ref count == 0. Then check the last accessed time. Prefer to free older blocks
following LRU"; docs.vllm.ai design/prefix_caching), and SGLang's radix cache evicts unreferenced leaves least
recently used first (L. Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs",
arXiv 2312.07104, §3, RadixAttention's LRU eviction with reference counts for running requests). With one
group (G = 1) every request reads the prefix: it is never the least recently used and stays while the pool
holds it.
A finite benchmark (`requests` prompts, deploy --requests) starts with no group's prefix computed: the
first request of each group it reaches finds nothing to hit, a compulsory miss (M. D. Hill, "Aspects of
Cache Memory and Instruction Buffer Performance", PhD thesis, UC Berkeley, 1987: compulsory, capacity and
conflict misses; Hill & Smith, "Evaluating Associativity in CPU Caches", IEEE Trans. Computers 38(12),
1989). With the requests spread equally over G groups, n requests reach G (1 − (1 − 1/G)^n) of them (the
occupancy of groups_in_use), so that many of the run's requests compute their whole prefix (cold_share);
prompts of the same sequence sent before the run (`warm`: an earlier stage of inference-perf, whose every
stage draws its prompts from the start of the same shuffled list, kubernetes-sigs/inference-perf
inference_perf/loadgen/load_generator.py run_stage @ad65fe0, `data_generator = self.datagen.get_data()`,
and datagen/shared_prefix_datagen.py get_data / `rng.permutation`) already reached theirs: only the groups
the run reaches beyond them are new. An endless load (no --requests) has no compulsory misses: its steady
state is what the rest of this module gives. Not modelled: requests of a group that arrive while its first
request is still prefilling (they miss too where the engine has not yet cached the blocks), and routing by
prefix across data-parallel ranks: an engine of several attention data-parallel groups (services/deploy.py
_most_pooled) keeps one prefix cache per group, each sized and hit as here over its share of the pool and of
the requests, every group holding its own copy of the prefixes.

A host tier (vLLM's native CPU offload and LMCache, SGLang HiCache's L2, llama.cpp's host KV) keeps a copy
of the blocks the GPU computed: it is inclusive, so the histories it can serve are those of the larger of
the two tiers, and it adds hits only when it is larger than the GPU's room for them (LMCache docs, "CPU
offloading helps only if the CPU cache is larger than the GPU's prefix cache"; AWS Neuron vLLM guide, "A host
tier that is not larger than HBM adds few hits"). A block found on the host is copied over the card's host
link instead of being computed again. The same holds for the prefixes of many groups: those of the groups no
running sequence reads, which the GPU pool keeps only as room is left, the host tier keeps in its own LRU
beside the waiting histories (one working set, reused equally: Fagin 1977), and a request whose group's
prefix the GPU pool lost finds it there with the share the host keeps beyond the GPU's. vLLM's offloading
connector stores every block the GPU computes and looks a request's prefix up in it before computing
(vLLM blog 2025-12-29, "Inside vLLM's New Offloading Connector": "The KV values calculated for one prompt
can be reused for other prompts that share the same prefix"; vllm/v1/kv_offload/lru_manager.py @3a04cf8,
LRUOffloadingManager: "evicts blocks by LRU", a lookup counting the request's leading blocks it holds); SGLang
HiCache does the same with host memory as L2 (docs.sglang.ai, "HiCache System Design": "When multiple
requests share the same prefix, the KV cache for that prefix is identical ... RadixAttention ... leverages
idle GPU memory to cache and reuse prefix KV caches, and HiCache ... extends this idea to host memory and
distributed storage"). llm-d's tiered prefix cache guide measures exactly that case: 250 groups of
16,000-token prompts, a working set larger than the GPU pools and smaller than GPU + host ("HBM < KVCache <
HBM + CPU RAM", data/validation/serving_llmd_tiered.toml)."""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING

from ..catalog.records import record

if TYPE_CHECKING:
    from .serving import Workload

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
    prefix_groups: int = 1  # G: distinct shared prefixes of N tokens, requests spread equally over them
    requests: int = 0  # a finite benchmark of this many requests, the cache cold at its start; 0: endless
    warm: int = 0  # prompts of the same sequence sent before the benchmark (their groups' prefixes computed)


def groups_reached(groups: int, requests: float) -> float:
    """The expected number of G equally likely groups that `requests` requests reach: G (1 − (1 − 1/G)^n)
    (occupancy of G equally likely cells by n draws)."""
    if groups <= 1:
        return 1.0 if requests > 0 else 0.0
    return groups * (1 - (1 - 1 / groups) ** max(requests, 0.0))


def cold_share(reuse: Reuse) -> float:
    """The share of a finite benchmark's sessions whose group's prefix no earlier request computed (a
    compulsory miss: module docstring): the groups its sessions reach beyond those the sessions of the
    `warm` prompts before it reached, over its sessions; 0 for an endless load (no --requests) or no shared
    prefix. Only a session's first prompt starts with the shared prefix alone (its later turns send their
    history after it, the group already reached), so the draws are sessions, requests / --turns (likewise
    the warm prompts), and the share is per session, as the shared prefix's hits are (hits: shared / turns a
    request)."""
    t = max(reuse.turns, 1)
    n = reuse.requests / t
    if n <= 0 or reuse.shared_prefix_tokens <= 0:
        return 0.0
    g = reuse.prefix_groups
    warm = reuse.warm / t
    reached = groups_reached(g, max(n, warm)) - groups_reached(g, warm)
    return min(max(reached, 0.0) / n, 1.0)


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


def groups_in_use(reuse: Reuse, sequences: float) -> float:
    """The expected number of the G prefix groups that `sequences` running sequences read, each group
    equally likely: G (1 − (1 − 1/G)^n) (occupancy of G equally likely cells by n draws); 1 with one group
    (the prefix every request reads)."""
    return groups_reached(reuse.prefix_groups, sequences) if reuse.prefix_groups > 1 else 1.0


def prefix_layouts(reuse: Reuse) -> tuple[tuple[int, int], ...]:
    """How the pool may hold the shared prefixes beside the running sequences, as (tokens held once for all
    sequences, prefix tokens each sequence holds as its own): one group is held once; with G groups a
    sequence shares its group's prefix with the others of its group, which uses at most what either bound
    takes: every group held once (G × N), or every sequence holding its prefix alone. The sizing takes the
    layout that admits the most sequences, a lower bound on what the engine holds."""
    n = reuse.shared_prefix_tokens
    if reuse.prefix_groups <= 1 or n == 0:
        return ((n, 0),)
    return ((reuse.prefix_groups * n, 0), (0, n))


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
    # the requests by what they find (a request finds its reuse whole or not at all: its group's prefix, its
    # session's history), as (share of the requests, prompt tokens it computes, tokens it copies from the
    # host tier); their means are the token figures above. Empty: every request the mean
    classes: tuple[tuple[float, float, float], ...] = ()

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
    host tier's size. The shared prefix hits while the pool holds it: with several groups (prefix_groups),
    where another running sequence reads the request's group, else as the LRU keeps the groups no sequence
    reads in what the running sequences leave (module docstring); the histories of the waiting sessions
    share what the running sequences and the cached prefixes leave (lru_hit_share), or the host tier where
    larger (inclusive). A finite benchmark's requests that reach their group first (cold_share) find its
    prefix in neither tier."""
    shared = min(reuse.shared_prefix_tokens, i)
    whole = reusable_tokens(i, o, reuse)
    if whole <= 0:
        return Hits(0.0, 0.0, 0.0)
    private = running * held_tokens(i, o, reuse, True)
    history = whole - shared / reuse.turns  # per request: the hits turns 2 … T can take from their history
    waiting = max(sessions - running, 0.0) * history_tokens(i, o, reuse)
    p = _prefix_hits(reuse, shared, pool_tokens, running, private)
    fits = pool_tokens >= shared
    room = pool_tokens - p.held - private
    gpu_share = lru_hit_share(room, waiting)
    # the host tier keeps, least recently used first, copies of both what the GPU pool evicts: the prefixes
    # of the groups no running sequence reads and the histories of the waiting sessions (one LRU over both,
    # reused equally); it adds what it keeps beyond what the GPU pool still holds of each
    host = lru_hit_share(host_tokens, p.unread + waiting)
    host_share = max(host - gpu_share, 0.0)
    prefix_on_host = (1 - p.others) * max(host - p.kept, 0.0) if fits and p.unread > 0 else 0.0
    # a finite benchmark's first request of each group finds its prefix in neither tier (cold_share)
    warm = 1 - cold_share(reuse)
    prefix_on_host *= warm
    shared_hit = shared / reuse.turns * p.share * warm if fits else 0.0
    first_gpu = p.share * warm if fits else 0.0
    classes = request_classes(i, o, reuse, (first_gpu, prefix_on_host), (gpu_share, host_share))
    return Hits(shared_hit + history * gpu_share,
                shared / reuse.turns * prefix_on_host + history * host_share, whole, classes)


def request_classes(i: int, o: int, reuse: Reuse, first: tuple[float, float], later: tuple[float, float]
                    ) -> tuple[tuple[float, float, float], ...]:
    """The requests of a session by what they find, as (share of the requests, prompt tokens computed,
    tokens copied from the host tier) (Hits.classes). A request finds its reuse whole or not at all: its
    group's prefix (turn 1, a 1 / T share of the requests: I tokens sent, the shared prefix N among them),
    its session's history (turns 2 … T: (t − 1)(I + O) tokens before its I new ones, T (I + O) / 2 at the
    mean over those turns, the prefix inside it). `first`: the chances a turn 1 finds its prefix in the GPU
    pool and on the host; `later`: those of a later turn's history. A hit computes the rest of its prompt
    (a host hit copies its reuse first), a miss its whole prompt. Weighted by the requests, their means are
    `hits`' token figures (a share of the requests times the tokens each finds); a later turn's history is
    taken at its mean over the turns (a missed last turn computes more, a missed second turn less)."""
    shared = min(reuse.shared_prefix_tokens, i)
    t = max(reuse.turns, 1)
    out: list[tuple[float, float, float]] = []
    g, h = first
    h = min(h, max(1.0 - g, 0.0))
    out += [(g / t, i - shared, 0.0), (h / t, i - shared, float(shared)), ((1.0 - g - h) / t, float(i), 0.0)]
    if t > 1:
        history = t * (i + o) / 2
        g, h = later
        h = min(h, max(1.0 - g, 0.0))
        share = (t - 1) / t
        out += [(g * share, float(i), 0.0), (h * share, float(i), history),
                ((1.0 - g - h) * share, i + history, 0.0)]
    return tuple(c for c in out if c[0] > 0)


def with_hits(w: Workload, h: Hits | None, copy_s_per_token: float | None) -> Workload:
    """`w` (its mean prompt) with what the prefix cache serves of it (its hits `h`): the mean tokens found
    and seconds copying the host tier's hits (`copy_s_per_token`; None: no host tier), and the requests by
    what they find (Hits.classes: the p90 TTFT is their mixture's, core/serving.py ttft_p90_s). `w` as it
    is where nothing is found. The one conversion of hits to a workload (services/speed.py, deploy.py)."""
    if h is None or h.cached_tokens <= 0:
        return w
    copy = copy_s_per_token or 0.0
    classes = tuple((share, max(w.input_tokens - computed, 0.0), host * copy if host else 0.0)
                    for share, computed, host in h.classes)
    return replace(w, cached_tokens=h.cached_tokens, load_s=h.host_tokens * copy if h.host_tokens else 0.0,
                   classes=classes)


@record(slots=True)
class _Prefixes:
    """The shared prefixes in a replica's pool (_prefix_hits)."""

    share: float  # the share of requests that find their group's prefix in the GPU pool
    held: float  # prefix tokens the pool holds
    others: float  # the chance another running sequence reads the request's group (its prefix held)
    unread: float  # prefix tokens of the groups no running sequence reads (cached only while room is left)
    kept: float  # the share of those the GPU pool keeps (LRU in the room left)


def _prefix_hits(reuse: Reuse, shared: int, pool_tokens: float, running: float, private: float) -> _Prefixes:
    """The share of requests that find their group's prefix cached, and the prefix tokens the pool holds:
    one group, always (the caller checks the pool holds it) and N; G groups, those `running` sequences read
    (groups_in_use) held, a request's group among them with the probability that one of the other running
    sequences reads it, else cached as the LRU keeps the unread groups in the room the running sequences'
    own tokens (`private`) and the read prefixes leave."""
    g = reuse.prefix_groups
    if g <= 1:
        return _Prefixes(1.0, float(shared), 1.0, 0.0, 1.0)
    used = groups_in_use(reuse, running)
    others = 1 - (1 - 1 / g) ** max(running - 1, 0.0)  # another running sequence reads the request's group
    spare = pool_tokens - used * shared - private
    unread = (g - used) * shared
    kept = lru_hit_share(spare, unread)
    held = used * shared + min(max(spare, 0.0), unread)
    return _Prefixes(others + (1 - others) * kept, held, others, unread, kept)


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
    OffloadReason.HELPS: "it keeps reused prompt tokens (session histories, prefixes of groups) the GPU pool "
                         "has no room for, and copying them back over the host link is faster than computing "
                         "them again",
    OffloadReason.NO_REUSE: "the workload reuses no prompt tokens (give --shared-prefix-tokens or "
                            "--turns): there is nothing to keep",
    OffloadReason.GPU_HOLDS: "the GPU's KV pool already keeps every reused token",
    OffloadReason.NOT_LARGER: "the host tier is not larger than the GPU pool's room for cached tokens: it "
                              "holds copies of what the GPU holds and adds no hit (LMCache: only a host "
                              "cache larger than the GPU's helps)",
    OffloadReason.SLOWER: "copying a token's KV cache over the host link takes longer than computing it "
                          "again",
}
