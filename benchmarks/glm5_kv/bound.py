"""Physical per-rank KV/state bytes of GLM-5.3-Flash (+DFlash2) at TP8, from model dimensions."""

from __future__ import annotations

import math

TP = 8
NUM_SPEC = 7  # DFlash2 proposes 7 tokens per step
KV_BYTES = {"auto": 2, "fp8": 1}  # bf16 model dtype vs fp8 KV cache


class Bound:
    """Bytes a request needs with no block rounding and no padding, on one TP rank."""

    def __init__(self, text: dict, draft: dict, kv: str, with_draft: bool):
        kvb = KV_BYTES[kv]
        n_mla = text["num_hidden_layers"] // 4  # every 4th layer is MLA, the rest KDA
        n_kda = text["num_hidden_layers"] - n_mla
        kpool = text["index_kpool"]
        spec = NUM_SPEC if with_draft else 0
        # MLA latent (kv_lora + rope) is replicated on every rank, not sharded.
        mla = n_mla * (text["kv_lora_rank"] + text["qk_rope_head_dim"]) * kvb
        # Indexer key: fp8 values + one fp32 scale per 128, pooled over kpool tokens.
        index = n_mla * (text["index_head_dim"] + 4 * text["index_head_dim"] // 128) / kpool
        self.target_per_token = mla + index
        # KDA: bf16 conv window (q,k,v channels; widened by the draft tokens) + fp32 state.
        heads, hd = text["linear_num_heads"] // TP, text["linear_head_dim"]
        conv = 3 * heads * hd * (text["linear_conv_kernel_dim"] - 1 + spec) * 2
        self.kda_state = n_kda * (conv + heads * hd * hd * 4)
        # Indexer tail ring: kpool x next power of two covering kpool + draft tokens; K and gate.
        ring = kpool * 2 ** math.ceil(math.log2(math.ceil((kpool + spec) / kpool)))
        self.tail = n_mla * ring * 2 * text["index_head_dim"] * 2
        self.draft_per_token = self.window = 0
        if with_draft:
            kv_heads = max(1, draft["num_key_value_heads"] // TP)
            self.draft_per_token = (draft["num_hidden_layers"] * 2 * kv_heads
                                    * draft["head_dim"] * kvb)
            self.window = draft["sliding_window"]

    def request_bytes(self, length: int) -> float:
        """Target KV for every token + fixed states + drafter KV for its window only."""
        return (self.target_per_token * length + self.kda_state + self.tail
                + self.draft_per_token * min(length, self.window))

    def mismatch(self, spec_bytes: dict) -> list[str]:
        """Where vLLM's own unpadded spec bytes disagree with these formulas (should be none)."""
        ours = {"target_per_token": self.target_per_token, "draft_per_token": self.draft_per_token,
                "kda_state": self.kda_state, "tail": self.tail}
        return [f"{k}: bound {v:,.0f} vs specs {spec_bytes[k]:,.0f}"
                for k, v in ours.items() if abs(v - spec_bytes[k]) > 0.5]
