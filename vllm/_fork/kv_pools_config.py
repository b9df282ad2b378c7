"""The KV cache config of carved pools: each KV group's slots per shared block, read by the scheduler and workers."""

from __future__ import annotations

from dataclasses import dataclass

from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheTensor


@dataclass
class PooledKVCacheConfig(KVCacheConfig):
    """A KV cache config whose groups may hold k slots per shared block (k = 1: the shared pool itself)."""

    slots_per_block: tuple[int, ...] = ()
    """Per KV group: slots its pool carves out of one shared block."""

    def group_slots(self, group_id: int) -> int:
        return self.slots_per_block[group_id] if group_id < len(self.slots_per_block) else 1

    def layer_slots(self, layer_name: str) -> int:
        for group_id, group in enumerate(self.kv_cache_groups):
            if layer_name in group.layer_names:
                return self.group_slots(group_id)
        return 1

    def num_blocks_of(self, tensor: KVCacheTensor) -> int:
        # A carved group's views address every slot of every shared block.
        return super().num_blocks_of(tensor) * self.layer_slots(tensor.layers[0])
