"""Where a set of cards puts one copy of a model: the split plan, deploy, max-context and speed all use.

Runtimes that shard each layer (vLLM, SGLang, TensorRT-LLM) run tensor parallel inside a node and pipeline
stages across nodes: "the tensor parallel size is the number of GPUs in each node, and the pipeline parallel
size is the number of nodes" (vLLM docs, "Distributed inference and serving"; SGLang `--tp` / `--pp-size`
likewise). Each pipeline stage holds its own layers' weights and KV cache, so the cache is copied only inside
a tensor-parallel group (core/kv.py kv_replication), never once per card of the whole set. llama.cpp, Ollama
and transformers split the layers over the cards of one node."""

from __future__ import annotations

from functools import lru_cache

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..catalog.runtimes import RuntimeProfile
from .speed import default_tp

# Pipeline stages on different nodes pass activations over the network. Assumption: one 400 Gb/s InfiniBand
# NDR port per node (50 GB/s; NVIDIA ConnectX-7 data sheet) and ~20 µs per point-to-point transfer (the
# order NCCL send/recv reaches between nodes); only NVLink / Infinity Fabric cards (the ones sold in 8-card
# server nodes with such ports) are planned across nodes.
NODE_LINK_GBPS = 50.0
NODE_HOP_LATENCY_S = 20e-6
MULTI_NODE_INTERCONNECTS = ("nvlink", "infinity-fabric")


@record(slots=True)
class Shape:
    """One copy of the model on `per_node` × `nodes` cards: `tp` cards per tensor-parallel group, `pp`
    pipeline stages (across nodes, or layers split over the cards for llama.cpp / Ollama)."""

    per_node: int
    nodes: int
    tp: int
    pp: int

    @property
    def cards(self) -> int:
        return self.per_node * self.nodes


def spans_nodes(rt: RuntimeProfile, gpu: Gpu) -> bool:
    """Whether a copy may span several nodes: a runtime with tensor and pipeline parallelism, on a card
    sold in multi-node servers."""
    return rt.tensor_parallel and rt.pipeline_parallel and gpu.interconnect in MULTI_NODE_INTERCONNECTS


def shape_of(rt: RuntimeProfile, count: int, model: ModelSpec | None, node_size: int,
             tp: int | None = None) -> Shape:
    """How `count` cards run one copy: full nodes of `node_size` cards (the last one as full as the others),
    tensor parallel over as many cards of a node as the model's heads divide into (or `tp` when asked), the
    rest pipeline stages."""
    count = max(count, 1)
    nodes = -(-count // node_size)
    per_node = -(-count // nodes)
    t = default_tp(rt.tensor_parallel, per_node, tp, model)
    return Shape(per_node, nodes, t, max(count // t, 1))


def shapes(rt: RuntimeProfile, gpu: Gpu, model: ModelSpec | None, set_sizes: tuple[int, ...], node_size: int,
           max_nodes: int) -> list[Shape]:
    """Every way to hold one copy, smallest first: 1/2/4/8 cards in one node, then whole nodes (pipeline
    stages across them) where the runtime and the card allow it. A runtime without pipeline parallelism
    (TGI) takes only sets its heads divide into."""
    return list(_shapes(rt, gpu, model, set_sizes, node_size, max_nodes))


# pure in its frozen arguments: the every-card plan asks it for each card one of which cannot hold the model,
# at every context the page asks (up to 64 nodes of shapes each), deploy for each card and runtime
@lru_cache(maxsize=4096)
def _shapes(rt: RuntimeProfile, gpu: Gpu, model: ModelSpec | None, set_sizes: tuple[int, ...], node_size: int,
            max_nodes: int) -> tuple[Shape, ...]:
    out: list[Shape] = []
    for per_node in sorted(n for n in set_sizes if n <= node_size):
        if per_node < gpu.min_count or (gpu.max_count and per_node > gpu.max_count):
            continue
        s = shape_of(rt, per_node, model, node_size)
        if rt.tensor_parallel and s.tp < per_node and not rt.pipeline_parallel:
            continue
        out.append(s)
        if per_node == node_size and spans_nodes(rt, gpu):
            out += [shape_of(rt, per_node * n, model, node_size) for n in range(2, max_nodes + 1)]
    return tuple(out)


def clear_memos() -> None:
    """Forget the shapes kept (benchmarks time a question from cold)."""
    _shapes.cache_clear()
