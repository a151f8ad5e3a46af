"""llama.cpp's server (`llama-server`): the llama.cpp-like engine (llamacpp_like.py) and its launch line
(tools/server/README.md options, checked against tests/data/runtime_options/llama-server.toml)."""

from __future__ import annotations

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.records import record
from .base import NotModelled
from .launch import Launch, LaunchArgs, SpecLaunch
from .llamacpp_like import GGML_SCHED_MAX_COPIES, LlamaCppLike
from .lora import LORA_FILE_DEFAULT, LORA_FILE_TYPES, LoraPlan, LoraSet, lora_params

# llama.cpp loads each --lora FILE at start (common/arg.cpp: one adapter per --lora, scale 1.0, applied to
# every request unless --lora-init-without-apply or a request's "lora" scales); llama_adapter_lora_init_impl
# puts each lora_a/lora_b pair in the buffer type of the base tensor it changes (the device holding that
# layer) and reads the file's tensors into it, ggml_nbytes each: the adapter file's bytes, beside its layers
LORA_SOURCE = ("https://github.com/ggml-org/llama.cpp/blob/0650ea8c05bc6e31273182470197e9b2e50253e0/"
               "src/llama-adapter.cpp")


@record(slots=True)
class LlamaCpp(LlamaCppLike):
    # -ctk/-ctv cache types (common/arg.cpp kv_cache_types)
    KV_NAMES = {"q8_0": "q8_0", "q4_0": "q4_0", "q4_1": "q4_1", "q5_0": "q5_0", "q5_1": "q5_1",
                "iq4_nl": "iq4_nl", "f32": "f32"}

    PIPELINE_COPIES = GGML_SCHED_MAX_COPIES  # llama_context: pipeline parallelism over a layer split

    def budget_per_card(self, gpu: Gpu, utilization: float | None = None, tp: int = 1, pp: int = 1,
                        model: ModelSpec | None = None) -> int:
        """The card less what --fit keeps free on it (--fit-target, from the release feature `fit`,
        data/releases.toml): llama-server places its layers, cache and workspace in the rest and puts the
        weights beyond it in system RAM (common/fit.cpp common_params_fit_impl)."""
        whole = LlamaCppLike.budget_per_card(self, gpu, utilization, tp, pp)
        return max(whole - self.profile.fit_target_bytes, 0)
    SPECULATIVE = ("draft",)  # a draft model (-md); llama-server has no EAGLE or MTP drafting

    def speculative_flags(self, s: SpecLaunch) -> list[str]:
        # the draft's layers all on the card (-ngld), at most K drafted tokens a step (--draft-max)
        return ["-md", s.draft or "", "-ngld", "999", "--draft-max", str(s.tokens)]

    def model_ref(self, *, asked: str | None, model_id: str, hf: str | None, tag: str | None,
                  quant: str) -> str:
        name = asked or model_id
        return name if name.endswith(".gguf") else f"{model_id}-{quant}.gguf"

    def stack_flags(self, port: int, role: str,
                    split: tuple[float, ...]) -> tuple[list[str], list[tuple[str, str]]]:
        # llama-server's endpoints for an embedder (--embeddings) or a reranker (--reranking), and its layers
        # over unequal cards (--tensor-split, proportions)
        argv = ["--port", str(port), *{"embed": ["--embeddings"], "rerank": ["--reranking"]}.get(role, [])]
        if self.profile.fit_target_bytes:
            # a stack places every server itself, on the whole card: its layers all on the card, which turns
            # llama-server's own --fit (and its --fit-target margin) off (common/fit.cpp: "n_gpu_layers
            # already set by user")
            argv += ["-ngl", "all"]
        if split:
            argv += ["--tensor-split", ",".join(f"{x:g}" for x in split)]
        return argv, []

    def lora_plan(self, m: ModelSpec, lora: LoraSet, users: int, tp: int) -> LoraPlan:
        # LORA_SOURCE: every adapter file whole, on the cards of the layers it changes (by_layer)
        if lora.slots:
            raise NotModelled("max_loras: llama-server loads every --lora adapter at start (no slots)")
        # common/arg.cpp splits --lora and --lora-scaled on commas (parse_csv_row), each of the latter's
        # items on ':' (FNAME:SCALE)
        odd = [p for p in lora.paths if "," in p or (lora.scale is not None and ":" in p)]
        if odd:
            raise NotModelled(f"llama-server splits --lora on ',' (and --lora-scaled on ':'): "
                              f"{odd[0][:64]!r} cannot be passed; rename the file")
        kind = lora.file_type or LORA_FILE_DEFAULT
        one = lora_params(m, lora.rank, 1, lora.targets) * LORA_FILE_TYPES[kind]
        paths = lora.paths or tuple(f"adapter-{i + 1}.gguf" for i in range(lora.adapters))
        flags = tuple(w for p in paths for w in (("--lora", p) if lora.scale is None else
                                                  ("--lora-scaled", f"{p}:{lora.scale:g}")))
        return LoraPlan(lora.adapters * one, 0, lora.adapters, flags,
                        f"{lora.adapters} LoRA adapter file(s) of rank {lora.rank} ({kind}) loaded at start "
                        "beside the layers they change, applied to every request (scale "
                        f"{1 if lora.scale is None else lora.scale:g})"
                        + ("" if lora.paths else "; adapter-N.gguf stand for your adapter files"),
                        by_layer=True)

    def health_check(self, port: int) -> list[str]:
        # curl is in llama.cpp's server image, whose own HEALTHCHECK uses it
        return ["CMD", "curl", "-f", f"http://localhost:{port}/health"]

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        # -c is the context of all slots together: each of the -np slots gets -c / N
        slots = a.parallel or a.max_num_seqs
        source = ["-m", model] if model.lower().endswith(".gguf") else ["-hf", model]
        if a.n_gpu_layers is not None:
            layers = ["-ngl", str(a.n_gpu_layers)]
        elif self.profile.fit_target_bytes:
            # no -ngl: llama-server's --fit (on by default at this release) places the layers and keeps
            # --fit-target free, as the plan's budget does (budget_per_card); a -ngl of the user's turns it
            # off (common/fit.cpp: "n_gpu_layers already set by user")
            layers = []
        else:
            layers = ["-ngl", "all"]
        argv = ["llama-server", *source, *layers, "-c", str(a.max_model_len * slots), "-np", str(slots)]
        flash = a.flash_attn
        if a.kv:
            flash = True  # a quantized V cache needs flash attention in llama.cpp
            argv += ["-ctk", a.kv, "-ctv", a.kv]
        if flash is not None:
            argv += ["-fa", "on" if flash else "off"]
        if a.cpu_moe_layers:
            argv += ["--n-cpu-moe", str(a.cpu_moe_layers)]
        if a.max_batched_tokens:
            argv += ["-b", str(a.max_batched_tokens)]
        notes = []
        if a.tp > 1 or a.pp > 1:
            notes.append("llama.cpp splits layers over every visible GPU (--split-mode layer): set "
                         "CUDA_VISIBLE_DEVICES to the cards of the set")
        return Launch(a.runtime, tuple(argv), notes=tuple(notes))


ADAPTER = LlamaCpp
