"""What a DFlash/DSpark draft sees after a prefix-cache hit versus a miss, with vLLM's own Scheduler and KV cache
manager on the CPU (no model runs: the scheduler's own inputs and block tables are the measurement).

Per request it records, up to the step where its prompt is done and the draft first proposes:
- the positions whose target hidden states (the draft's aux input) the target computes for it;
- the draft KV group's block table over the prompt: blocks the draft itself writes in those steps, blocks taken
  from the prefix cache (and whether the request that wrote them had computed those positions), null blocks;
- the positions whose draft KV the draft's attention needs (all of them, or the last `window` for a
  sliding-window draft) and how many of those hold nothing written.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

TARGET = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 4096, "hidden_size": 256,
          "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 64, "max_position_embeddings": 16384, "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}
DFLASH_CONFIG = {"target_layer_ids": [0, 2], "mask_token_id": 3}


@dataclass
class View:
    """One request's draft view at its first proposal."""

    name: str
    prompt: int
    hit: int  # prompt tokens served from the prefix cache
    aux_from: int  # first position whose target hidden states are computed for this request
    prefill_steps: int
    needed: int  # positions whose draft KV the draft attention reads
    written_now: int  # of those, written by this request's own prefill
    from_cache: int  # of those, in cached blocks the donor had computed
    stale: int  # of those, in blocks holding nothing written for these positions
    shared_blocks: list[int] = field(default_factory=list)


def _checkpoint(root: Path, name: str, config: dict) -> str:
    (root / name).mkdir()
    (root / name / "config.json").write_text(json.dumps(config))
    return str(root / name)


def build(prefix_caching: bool, window: int | None, block_size: int = 16, chunk: int = 1024):
    """A VllmConfig for a DFlash draft, the planner's KV groups for the target and draft layers, and a Scheduler."""
    import torch

    from vllm.config import (CacheConfig, DeviceConfig, ModelConfig, ParallelConfig, SchedulerConfig,
                             SpeculativeConfig, VllmConfig)
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (generate_scheduler_kv_cache_config, resolve_cache_hit_alignment_tokens,
                                             resolve_kv_cache_block_sizes)
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
    from vllm.v1.structured_output import StructuredOutputManager

    # GPU platforms run the hybrid KV cache manager, which gives a sliding-window draft its own group.
    current_platform.support_hybrid_kv_cache = lambda: True
    root = Path(tempfile.mkdtemp(prefix="draft-view-"))
    target = ModelConfig(model=_checkpoint(root, "target", TARGET), skip_tokenizer_init=True, max_model_len=16384)
    draft = TARGET | {"num_hidden_layers": 1, "architectures": ["DFlashDraftModel"], "block_size": 8,
                      "dflash_config": DFLASH_CONFIG}
    spec = SpeculativeConfig(method="dflash", model=_checkpoint(root, "dflash", draft), num_speculative_tokens=7,
                             target_model_config=target, target_parallel_config=ParallelConfig())
    vllm_config = VllmConfig(model_config=target, device_config=DeviceConfig(device="cpu"), speculative_config=spec,
                             cache_config=CacheConfig(block_size=block_size, enable_prefix_caching=prefix_caching),
                             scheduler_config=SchedulerConfig(max_num_batched_tokens=chunk, max_model_len=16384,
                                                              is_encoder_decoder=False, enable_chunked_prefill=True))
    common = dict(block_size=block_size, num_kv_heads=2, head_size=64, dtype=torch.bfloat16)
    specs = {f"model.layers.{i}.self_attn.attn": FullAttentionSpec(**common) for i in range(4)}
    specs["draft.layers.0.self_attn.attn"] = (
        SlidingWindowSpec(sliding_window=window, is_draft=True, **common) if window
        else FullAttentionSpec(is_draft=True, **common))
    resolve_kv_cache_layout(vllm_config, [["LBNHC"]], specs.values())
    groups = get_global_kv_cache_groups(vllm_config, [specs])
    # What EngineCore._initialize_kv_caches does between planning and building the scheduler.
    kv_cache_config = generate_scheduler_kv_cache_config(
        get_kv_cache_configs(vllm_config, [specs], [256 << 20], groups))
    vllm_config.cache_config.num_gpu_blocks = kv_cache_config.num_blocks
    scheduler_block, hash_block = resolve_kv_cache_block_sizes(kv_cache_config, vllm_config)
    kv_cache_config.hash_block_size = hash_block
    kv_cache_config.cache_hit_alignment_tokens = resolve_cache_hit_alignment_tokens(
        kv_cache_config, vllm_config, scheduler_block, hash_block)
    scheduler = Scheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                          structured_output_manager=StructuredOutputManager(vllm_config),
                          block_size=scheduler_block, hash_block_size=hash_block)
    draft_group = next(i for i, g in enumerate(kv_cache_config.kv_cache_groups)
                       if any(name.startswith("draft.") for name in g.layer_names))
    return vllm_config, scheduler, draft_group, hash_block


class Engine:
    """The scheduler driven as EngineCore drives it, with a stand-in for the model: one fixed token per step."""

    def __init__(self, prefix_caching: bool, window: int | None, **kwargs):
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

        self.vllm_config, self.scheduler, self.draft_group, hash_block = build(prefix_caching, window, **kwargs)
        self.window = window
        self.block_size = self.scheduler.kv_cache_config.kv_cache_groups[self.draft_group].kv_cache_spec.block_size
        self.hasher = None
        if prefix_caching:
            fn = get_hash_fn_by_name(self.vllm_config.cache_config.prefix_caching_hash_algo)
            init_none_hash(fn)
            self.hasher = get_request_block_hasher(hash_block, fn, self.vllm_config.num_hash_lookahead_tokens)
        self.written: dict[int, int] = {}  # draft block id -> bit mask of the in-block positions holding KV
        self.owned: dict[str, int] = {}  # request -> draft blocks it already holds (cache hits or its own)
        self.outputs: dict[str, list[int]] = {}

    def _step(self) -> dict:
        from vllm.v1.outputs import ModelRunnerOutput

        out = self.scheduler.schedule()
        sampled, steps = [], {}
        for req_id, n in out.num_scheduled_tokens.items():
            request = self.scheduler.requests[req_id]
            start = request.num_computed_tokens - n  # schedule() already advanced it
            steps[req_id] = (start, n)
            blocks = self.scheduler.kv_cache_manager.get_block_ids(req_id)[self.draft_group]
            # Blocks a request is newly given hold nothing yet; blocks it got as cache hits keep the donor's KV.
            for index in range(self.owned.setdefault(req_id, start // self.block_size), len(blocks)):
                self.written[blocks[index]] = 0
            self.owned[req_id] = len(blocks)
            for pos in range(start, start + n):  # the draft writes context KV where the target computed
                block = blocks[pos // self.block_size]
                self.written[block] = self.written.get(block, 0) | 1 << (pos % self.block_size)
            done = start + n >= request.num_prompt_tokens
            answer = self.outputs.setdefault(req_id, [])
            sampled.append([7 + len(answer)] if done else [])
        order = {"req_ids": list(out.num_scheduled_tokens)}
        if "req_id_to_index" in {f.name for f in dataclasses.fields(ModelRunnerOutput)}:  # 0.33.0; 0.34.0 dropped it
            order["req_id_to_index"] = {r: i for i, r in enumerate(out.num_scheduled_tokens)}
        self.scheduler.update_from_output(out, ModelRunnerOutput(**order, sampled_token_ids=sampled))
        for req_id, tokens in zip(out.num_scheduled_tokens, sampled):
            self.outputs[req_id].extend(tokens)
        return steps

    def run(self, name: str, prompt: list[int], max_tokens: int = 8) -> View:
        """Serve one request to completion; its view at the step its prompt finished."""
        from vllm import SamplingParams
        from vllm.v1.request import Request

        request = Request(name, prompt, SamplingParams(max_tokens=max_tokens, ignore_eos=True), None,
                          block_hasher=self.hasher)
        self.scheduler.add_request(request)
        view, steps, first = None, 0, None
        while name in self.scheduler.requests and not self.scheduler.requests[name].is_finished():
            start, n = self._step().get(name, (None, 0))
            if start is None:
                continue
            steps += 1
            first = start if first is None else first
            if view is None and start + n >= len(prompt):
                view = self._view(name, len(prompt), first, steps)
        return view

    def _view(self, name: str, prompt: int, aux_from: int, steps: int) -> View:
        blocks = self.scheduler.kv_cache_manager.get_block_ids(name)[self.draft_group]
        needed = range(max(0, prompt - self.window) if self.window else 0, prompt)
        written_now = sum(1 for p in needed if p >= aux_from)
        cached = [p for p in needed if p < aux_from]
        valid = [p for p in cached if self.written.get(blocks[p // self.block_size], 0) >> (p % self.block_size) & 1]
        shared = sorted({blocks[p // self.block_size] for p in cached})
        return View(name, prompt, aux_from, aux_from, steps, len(needed), written_now, len(valid),
                    len(cached) - len(valid), shared)


def measure(prefix_caching: bool, window: int | None, seed: int = 0) -> list[View]:
    """Agent-like traffic: a system prompt every request shares, and a second turn that carries the first turn and
    its answer."""
    import random

    rng = random.Random(seed)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(10, 4000) for _ in range(n)]

    engine = Engine(prefix_caching, window)
    system, turn = tokens(3000), tokens(700)
    views = [engine.run("a", system + turn), engine.run("b", system + tokens(300)),
             engine.run("c", system + tokens(357))]
    views.append(engine.run("a-turn2", system + turn + engine.outputs["a"] + tokens(414)))
    return views


COLUMNS = ("hit", "aux from", "steps", "needed", "own", "cached", "stale")


def _cells(view: View) -> list[int]:
    return [view.hit, view.aux_from, view.prefill_steps, view.needed, view.written_now, view.from_cache, view.stale]


def table(window: int | None) -> str:
    """One draft shape, prefix caching off and on side by side, one line per request."""
    off, on = measure(False, window), measure(True, window)
    kind = f"sliding-window draft (window {window})" if window else "full-attention draft"
    head = " ".join(f"{c:>8}" for c in COLUMNS)
    lines = [f"DFlash, {kind}: prefix caching off | on", f"{'request':>8} {'prompt':>6} | {head} | {head}"]
    for a, b in zip(off, on):
        assert a.prompt == b.prompt  # the same prompts on both sides
        lines.append(f"{a.name:>8} {a.prompt:>6} | " + " ".join(f"{x:>8}" for x in _cells(a)) + " | "
                     + " ".join(f"{x:>8}" for x in _cells(b)))
    computed = [sum(v.prompt - v.hit for v in side) for side in (off, on)]
    stale = [sum(v.stale for v in side) for side in (off, on)]
    lines.append(f"prompt tokens the target computed: {computed[0]} | {computed[1]} "
                 f"({computed[1] / computed[0]:.2f}x); stale draft positions: {stale[0]} | {stale[1]}")
    return "\n".join(lines)


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    print("hit: prompt tokens from the prefix cache; aux from: first position the target computes (the draft's aux "
          "input); steps: prefill steps to the first proposal; needed: positions the draft attention reads; own: "
          "of those, written by this request; cached: in cached blocks a request with the same tokens computed; "
          "stale: holding nothing written for them\n")
    print(table(None))
    print()
    print(table(512))
