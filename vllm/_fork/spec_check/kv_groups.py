"""Where one request's KV bytes go, per KV group of the plan vLLM's own planner made (spec-check's KV plan report).

A block id is one slice of the shared KV allocation, owned by one group at a time, so every block a request holds
costs the allocation's bytes per block id whatever its group's page, or 1/k of them in a pool the fork carved k
slots from each shared block (vLLM's capacity formula, `get_max_concurrency_for_kv_cache_config`, counts blocks the
same way, with the fork's edit for carved pools). What the group's layers really store in a block is their unpadded
pages; the rest of the slice is padding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vllm._fork.vocabulary import CheckName

NAME = CheckName.KV_CACHE_PLAN
REQUEST_LENGTHS = (8192, 131072)  # the lengths every report states, next to the deployment's own
# Thresholds of the capacity warnings, each from a public report: a draft group that was 74 % of a GLM-5.3-Flash
# request, padding that rose from 4 % to 26 % of Kimi-K3's KV when a DSpark draft joined, 46 KV groups whose
# per-group metadata work an upstream change cut (+102 % throughput).
DRAFT_SHARE_WARNING = 0.40
PADDING_SHARE_WARNING = 0.20
GROUP_COUNT_WARNING = 16


@dataclass(frozen=True)
class GroupRow:
    """One KV group at one request length."""

    kind: str  # the per-layer spec classes
    draft: bool  # holds the draft's layers (all of them, or next to the target's: see draft_used_bytes_per_block)
    layers: int
    block_size: int  # tokens per block
    page_bytes: int  # one layer's page as planned (padded; the first layer's where a group mixes kinds)
    used_bytes_per_block: int  # what the group's layers store in one block id: their unpadded pages
    draft_used_bytes_per_block: int  # of those, the draft's layers' (a DSpark draft's MLA joins Kimi-K3's MLA group)
    blocks: int  # block ids a request holds (vLLM's term)
    speculative_blocks: int  # of those, recurrent states kept per draft position
    bytes: int  # blocks x the group's bytes per block id
    host_resident: bool  # in the host pool, outside the device's KV allocation
    slots: int = 1  # block ids per shared block: k in a pool the fork carved (docs/kv-pools.md), else 1


@dataclass(frozen=True)
class Breakdown:
    """The groups of one plan at one request length, with vLLM's own concurrency for it."""

    length: int
    block_bytes: int  # the shared allocation's bytes per block id
    num_blocks: int
    concurrency: float
    groups: tuple[GroupRow, ...]

    def _device(self) -> list[GroupRow]:
        return [row for row in self.groups if not row.host_resident]

    @property
    def bytes_per_request(self) -> int:
        return sum(row.bytes for row in self._device())

    def share(self, part: int) -> float:
        return part / self.bytes_per_request if self.bytes_per_request else 0.0

    @property
    def padding_bytes(self) -> int:
        return sum(row.bytes - row.blocks * row.used_bytes_per_block for row in self._device())

    @property
    def draft_bytes(self) -> int:
        """The draft's part of each group's bytes, in proportion to what its layers store there."""
        return sum(row.bytes * row.draft_used_bytes_per_block // row.used_bytes_per_block
                   for row in self._device() if row.used_bytes_per_block)

    @property
    def speculative_state_bytes(self) -> int:
        return sum(row.speculative_blocks * self.block_bytes // row.slots for row in self._device())

    def as_dict(self) -> dict:
        return {"length": self.length, "block_bytes": self.block_bytes, "num_blocks": self.num_blocks,
                "concurrency": self.concurrency, "bytes_per_request": self.bytes_per_request,
                "padding_share": self.share(self.padding_bytes), "draft_share": self.share(self.draft_bytes),
                "speculative_state_share": self.share(self.speculative_state_bytes),
                "groups": [asdict(row) for row in self.groups]}


def _row(vllm_config, group, block_bytes: int, draft_layers: set[str], slots: int = 1) -> GroupRow:
    from vllm.utils.math_utils import cdiv

    spec = group.kv_cache_spec
    # A worker's group keeps one spec per layer, by name, where its layers differ; a plain spec describes every layer.
    per_layer = getattr(spec, "kv_cache_specs", None) or dict.fromkeys(group.layer_names, spec)
    pages = {name: getattr(s, "real_page_size_bytes", s.page_size_bytes) for name, s in per_layer.items()}
    used = sum(pages.values())
    draft_used = sum(page for name, page in pages.items() if name in draft_layers)
    blocks = cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes)
    kinds = dict.fromkeys(type(s).__name__ for s in per_layer.values())  # a group may mix kinds (MLA + indexer)
    first = next(iter(per_layer.values()))
    # By layer name, as vLLM's planner tells draft groups: merging a group's specs drops their is_draft flag.
    return GroupRow(kind="+".join(kinds), draft=not draft_layers.isdisjoint(group.layer_names),
                    layers=len(group.layer_names), block_size=spec.block_size, page_bytes=first.page_size_bytes,
                    used_bytes_per_block=used, draft_used_bytes_per_block=draft_used, blocks=blocks,
                    speculative_blocks=getattr(first, "num_speculative_blocks", 0),
                    bytes=blocks * block_bytes // slots, host_resident=bool(group.host_resident), slots=slots)


def block_bytes(kv_cache_config) -> int:
    """The shared allocation's bytes per block id (every KVCacheTensor views one allocation of `size` bytes)."""
    device = [tensor.size for tensor in kv_cache_config.kv_cache_tensors if not tensor.host_resident]
    return max(device) // kv_cache_config.num_blocks if device else 0


def breakdown(vllm_config, kv_cache_config, length: int, draft_layers: set[str]) -> Breakdown:
    """The groups of `kv_cache_config` for requests of `length` tokens (`draft_layers`: the names of the draft's
    layers); the config's max_model_len is put back."""
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    model_config = vllm_config.model_config
    deployed = model_config.max_model_len
    model_config.max_model_len = length  # vLLM's per-request terms read the request length from here
    try:
        per_block = block_bytes(kv_cache_config)
        # A pool the fork carved gives its group k block ids per shared block (PooledKVCacheConfig).
        slots = getattr(kv_cache_config, "group_slots", lambda group_id: 1)
        rows = tuple(_row(vllm_config, group, per_block, draft_layers, slots(i))
                     for i, group in enumerate(kv_cache_config.kv_cache_groups))
        concurrency = get_max_concurrency_for_kv_cache_config(vllm_config, kv_cache_config)
    finally:
        model_config.max_model_len = deployed
    return Breakdown(length, per_block, kv_cache_config.num_blocks, concurrency, rows)


def breakdowns(vllm_config, kv_cache_config, layer_specs: dict) -> list[Breakdown]:
    """At the deployment's --max-model-len, then at each of REQUEST_LENGTHS it allows; `layer_specs` are the specs
    the runner collected, by layer name."""
    deployed = vllm_config.model_config.max_model_len
    lengths = [deployed] + [n for n in REQUEST_LENGTHS if n < deployed]
    draft_layers = {name for name, spec in layer_specs.items() if getattr(spec, "is_draft", False)}
    return [breakdown(vllm_config, kv_cache_config, n, draft_layers) for n in lengths]
