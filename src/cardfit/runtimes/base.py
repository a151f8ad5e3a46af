"""What every runtime family shares: memory accounting from its catalog profile (data/runtimes.toml) and
its speed constants. A family module (vllm_like.py, llamacpp_like.py, …) subclasses `Runtime` and
overrides only where its engine allocates differently; `runtimes.adapter(profile)` picks the class the
profile's `family` names. The methods are core/memory.py's RuntimeModel protocol."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..catalog.runtimes import RuntimeProfile
from ..core.kv import kv_cache_bytes, kv_replication
from ..core.memory import Memory, MemorySettings, padded_context
from ..core.weights import embedding_bytes
from .lora import LoraPlan, LoraSet

GIB = 2**30


class NotModelled(ValueError):
    """A figure the runtime reports that cardfit does not model for this case (the message says why)."""


@record(slots=True)
class SpeedConstants:
    """The runtime's calibrated speed constants (data/runtimes.toml; core/speed.py uses them)."""

    decode_efficiency: float
    prefill_efficiency: float
    overhead_s_per_layer: float
    overhead_s_per_sequence: float
    ram_efficiency: float
    expert_efficiency: float = 0.0          # routed experts' share of the stream rate (0: the dense share)
    overhead_s_per_moe_layer: float = 0.0   # a fixed step time per MoE layer


@record(slots=True)
class Runtime:
    profile: RuntimeProfile

    # ---- memory accounting (core/memory.py RuntimeModel)

    def stack_flags(self, port: int, role: str,
                    split: tuple[float, ...]) -> tuple[list[str], list[tuple[str, str]]]:
        """(flags, environment) a server sharing a machine adds to its launch line (services/stack.py): its
        port, the flags of its role (an embedder, a reranker) and its layer split over unequal cards. A
        server that takes `--port`, nothing else, unless its adapter says more."""
        return ["--port", str(port)], []

    def lora_plan(self, m: ModelSpec, lora: LoraSet, users: int, tp: int) -> LoraPlan:
        """What the server holds for a set of LoRA adapters (services/stack.py adapter entries): its GPU and
        host bytes from the engine's own allocation code, and its launch flags. None here."""
        raise NotModelled(f"cardfit plans LoRA adapters in vLLM, SGLang and llama.cpp servers, not in "
                          f"{self.profile.name}")

    def health_check(self, port: int) -> list[str]:
        """A container's health test of this server (services/stack.py's compose bundle): its /health
        through python3, which the vLLM and SGLang images carry."""
        check = f"import urllib.request; urllib.request.urlopen('http://localhost:{port}/health')"
        return ["CMD", "python3", "-c", check]

    def padded_context(self, context: int) -> int:
        return padded_context(context, self.profile)

    def kv_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        return kv_cache_bytes(m, self.padded_context(s.context), s.sequences, s.kv_dtype,
                              self.profile.window_cache)

    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        return 0

    def window_read_cells(self, m: ModelSpec, ubatch: int) -> int:
        """Cells a decode step's attention reads in each sliding-window layer of one sequence, once the
        cache has wrapped (0: the window itself)."""
        return 0

    def overhead_bytes(self, gpu: Gpu | None = None) -> int:
        return self.profile.context_bytes + self.profile.cuda_graph_bytes

    def host_weights_bytes(self, m: ModelSpec, q: Quant | None) -> int:
        return embedding_bytes(m, q) if self.profile.embeddings_on_host else 0

    def weights_padding_bytes(self, m: ModelSpec, q: Quant | None, s: MemorySettings, gpu: Gpu | None) -> int:
        return 0

    def budget_for(self, mem: Memory, gpu: Gpu, budget: int, tp: int = 1) -> int:
        """Per card: the budget a memory estimate may fill (budget_per_card's, whatever the estimate)."""
        return budget

    def startup_margin(self, mem: Memory, gpu: Gpu) -> int:
        """Bytes a server must find free at startup beyond its own share (the card's total times its stated
        utilization) to get the KV cache that share gives: none, but where the runtime sizes the cache from
        measured free memory too (vLLM 0.34)."""
        return 0
    def serving(self, *, role: str = "", attention_dp: int = 1, speculative: str = "",
                max_running: int = 0, draft_tokens: int = 0, server_tp: int = 0) -> Runtime:
        """The adapter of a server launched with these settings, where its own memory budget reads them
        (SGLang's reserve: runtimes/sglang.py reserved_mib): a disaggregated deployment's worker `role`
        ("prefill" | "decode", "" a replica), `attention_dp` attention data-parallel ranks, a --speculative
        method (cardfit's name, "": none), a given cap on running sequences (0: none), the tokens a
        drafting step verifies per sequence as the line gives them (0: none), the server's tensor-parallel
        size where it is more than the ranks its budget is asked for (an attention-DP + EP layout's whole
        set; 0: the same). This adapter itself where the budget reads none of them."""
        return self

    def launch_fraction(self, gpu: Gpu, tp: int = 1, pp: int = 1, model: ModelSpec | None = None
                        ) -> float | None:
        """The share of the card the launch line states where no --gpu-memory-utilization is given, when
        budget_per_card works out the engine's own (SGLang's --mem-fraction-static from its reserve); None:
        the profile's default, as budget_per_card takes it."""
        return None

    def budget_per_card(self, gpu: Gpu, utilization: float | None = None, tp: int = 1, pp: int = 1,
                        model: ModelSpec | None = None) -> int:
        """A fraction of the total CUDA reports (nvidia-smi's total less the driver's reserve, runtimes.toml
        cuda_total_shortfall_bytes) when the runtime reserves one (vLLM), else the whole card."""
        u = utilization if utilization is not None else self.profile.gpu_memory_utilization
        total = gpu.usable_bytes - self.profile.cuda_total_shortfall_bytes
        return int(total * u) if u else total

    # server-wide engine settings the engine divides among its attention data-parallel ranks (each rank takes
    # value // dp), by the release feature from which it does (per_dp_rank); none here: each rank's engine
    # takes the whole setting as its own
    DP_DIVIDED: ClassVar[Mapping[str, str]] = {}

    def per_dp_rank(self, setting: str, value: int, dp: int) -> int:
        """One attention data-parallel rank's limit when the server is started with `value` for an engine
        setting (`max_num_seqs`, `max_num_batched_tokens`): the engine's own division among its `dp` ranks
        where its adapter names the setting in DP_DIVIDED and its release has the feature named there
        (data/releases.toml), else `value` (each rank's engine takes the whole setting as its own)."""
        if dp <= 1 or value <= 0 or not self._dp_divides(setting):
            return value
        return max(value // dp, 1)

    def dp_server_value(self, setting: str, per_rank: int, dp: int) -> int:
        """The server's value of an engine setting that gives each of its `dp` attention data-parallel ranks
        `per_rank` (per_dp_rank's inverse): `per_rank` x dp where the engine divides the setting, else
        `per_rank` itself (each rank's engine takes the whole)."""
        if dp <= 1 or per_rank <= 0 or not self._dp_divides(setting):
            return per_rank
        return per_rank * dp

    def _dp_divides(self, setting: str) -> bool:
        feature = self.DP_DIVIDED.get(setting)
        return feature is not None and self.profile.has(feature)

    def kv_copies(self, m: ModelSpec | None, count: int) -> float:
        """Tensor parallel may replicate the cache (core/kv.py kv_replication); splitting by layers never."""
        return kv_replication(m, count) if m is not None and self.profile.tensor_parallel else 1.0

    # ---- defaults the runtime picks by itself

    def serve_batched_tokens(self, gpu: Gpu | None) -> int:
        """Tokens of one forward pass when the user sets none (the profile's prefill_chunk); vLLM-like
        engines pick theirs by card (runtimes/vllm_like.py)."""
        return self.profile.prefill_chunk

    def serve_max_num_seqs(self, gpu: Gpu | None) -> int:
        """Sequences scheduled at once when the user sets none (the profile's max_num_seqs)."""
        return self.profile.max_num_seqs

    def default_context(self, m: ModelSpec, vram_bytes: int) -> tuple[int, str]:
        """The context when the user gives none, and why: a tier by the set's total VRAM (Ollama), the
        runtime's own default, or the model's trained maximum (vLLM's max_model_len)."""
        rt = self.profile
        max_ctx = m.max_context or MODEL_CONTEXT_UNKNOWN
        if rt.context_tiers:
            num_ctx = max(n for gib, n in rt.context_tiers if vram_bytes >= gib * GIB)
            return min(num_ctx, max_ctx), f"{rt.name} default for {vram_bytes / GIB:.2f} GiB of VRAM"
        if rt.default_context:
            return min(rt.default_context, max_ctx), f"{rt.name} default"
        return max_ctx, f"{rt.name} default: the model's maximum"

    # a quantized KV cache (q8_0, q4_0) only runs with flash attention (llama.cpp: the V cache is read by the
    # flash-attention kernel; llama-context.cpp refuses otherwise)
    quantized_kv_needs_flash_attn: ClassVar[bool] = False

    # ---- speed

    def speed(self) -> SpeedConstants:
        rt = self.profile
        return SpeedConstants(rt.decode_efficiency, rt.prefill_efficiency,
                              rt.decode_overhead_us_per_layer * 1e-6,
                              rt.decode_overhead_us_per_sequence * 1e-6, rt.ram_efficiency,
                              rt.expert_efficiency, rt.moe_overhead_us_per_layer * 1e-6)

    def reported_total(self, m: ModelSpec, q: Quant, s: MemorySettings, partial: bool) -> tuple[int, str]:
        """The total the runtime itself reports for a loaded model, and how it adds up (Ollama: `ollama ps`
        SIZE, its own estimate; `partial`: layers spill to the CPU). Raises NotModelled where cardfit does
        not model one."""
        raise NotModelled(f"{self.profile.name} reports no total of its own that cardfit models "
                          "(total_memory is Ollama's `ollama ps` estimate)")

    # ---- the launch line: a serving runtime's adapter (`serves = true` in data/runtimes.toml) adds its own
    # `launch(model, LaunchArgs) -> Launch` (runtimes/launch.py `Serving`); what they share is here

    # cardfit's KV cache dtype → the engine's name for it (16-bit needs none)
    KV_NAMES: ClassVar[Mapping[str, str]] = {}

    def model_ref(self, *, asked: str | None, model_id: str, hf: str | None, tag: str | None,
                  quant: str) -> str:
        """How the launch line names the model: a Hugging Face repository (llama-server: a .gguf file,
        Ollama: a tag)."""
        return hf or asked or model_id


# A model whose config states no trained context: plan 4,096 tokens (llama-server's -c default,
# common/common.h n_ctx = 4096), the shortest default of the runtimes in data/runtimes.toml.
MODEL_CONTEXT_UNKNOWN = 4096
