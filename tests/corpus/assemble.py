"""Write the corpus checkpoints that are assembled from public reports, not copied (SOURCES.md says which).

    python tests/corpus/assemble.py   # rewrites the files below; the results are committed

GLM-5's tensor index (layers 0-77 and its MTP layer 78, names as vLLM's DeepSeek-V3.2/GLM-5 loader reads them;
of the 256 routed experts per layer only expert 0 is listed), the same index without layer 78 (a repack that
dropped the MTP layer, vllm#35548), a Quark-quantized GLM-5 whose MTP layer is stored in BF16 with no exclude
entry (vllm#49187), z-lab's Qwen3-8B DFlash draft in its published tensor layout, RedHatAI's Gemma-4 DFlash draft in
the speculators layout, an EAGLE3 head that ships its own embed_tokens (vllm#18906), and GLM-5.3-Flash's index in
its published multimodal layout (`model.language_model.layers.N.*`, MTP layer 45) with nvidia's NVFP4 export of it,
whose BF16 MTP layer its ignore list does not cover. Safetensors files are
written as their header alone (names, dtypes, shapes; no weight bytes), which is all spec-check reads.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

CONFIGS = Path(__file__).parent / "configs"
SHARDS = 79
# The Quark layout a Quark MXFP4 exporter writes (SOURCES.md); exclude holds lm_head only, no MTP layer.
QUARK = {"quant_method": "quark",
         "global_quant_config": {"weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "ch_axis": -1,
                                            "scale_format": "e8m0", "scale_type": "float", "is_dynamic": False,
                                            "round_method": "half_even", "scale_calculation_mode": "even",
                                            "observer_cls": "PerBlockMXObserver", "symmetric": None},
                                 "input_tensors": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32,
                                                   "ch_axis": -1, "scale_format": "e8m0", "scale_type": "float",
                                                   "is_dynamic": True, "round_method": "half_even",
                                                   "scale_calculation_mode": "even",
                                                   "observer_cls": "PerBlockMXObserver", "symmetric": None},
                                 "output_tensors": None, "bias": None},
         "exclude": ["lm_head"],
         "export": {"weight_format": "real_quantized", "pack_method": "reorder", "kv_cache_group": []},
         "layer_quant_config": {}, "layer_type_quant_config": {}, "kv_cache_quant_config": {}}


def _mla_with_indexer(c: dict) -> dict[str, list[int]]:
    """MLA attention with the DSA indexer (GLM-5's layers; GLM-5.3-Flash's DSA layers, with no RoPE dims)."""
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    q_rank, kv_rank = c["q_lora_rank"], c["kv_lora_rank"]
    index_heads, index_dim = c["index_n_heads"], c["index_head_dim"]
    return {"self_attn.q_a_proj.weight": [q_rank, hidden], "self_attn.q_a_layernorm.weight": [q_rank],
            "self_attn.q_b_proj.weight": [heads * (nope + rope), q_rank],
            "self_attn.kv_a_proj_with_mqa.weight": [kv_rank + rope, hidden],
            "self_attn.kv_a_layernorm.weight": [kv_rank],
            "self_attn.kv_b_proj.weight": [heads * (nope + v), kv_rank],
            "self_attn.o_proj.weight": [hidden, heads * v],
            "self_attn.indexer.wq_b.weight": [index_heads * index_dim, q_rank],
            "self_attn.indexer.wk.weight": [index_dim, hidden], "self_attn.indexer.k_norm.weight": [index_dim],
            "self_attn.indexer.k_norm.bias": [index_dim],
            "self_attn.indexer.weights_proj.weight": [index_heads, hidden]}


def _mlp_and_mtp_glue(c: dict, layer: int) -> dict[str, list[int]]:
    """Dense MLP before first_k_dense_replace, else MoE (routed expert 0 only); the MTP glue past the last layer."""
    hidden = c["hidden_size"]
    if layer < c["first_k_dense_replace"]:
        width = c["intermediate_size"]
        shapes = {"mlp.gate_proj.weight": [width, hidden], "mlp.up_proj.weight": [width, hidden],
                  "mlp.down_proj.weight": [hidden, width]}
    else:
        width, experts = c["moe_intermediate_size"], c["n_routed_experts"]
        shapes = {"mlp.gate.weight": [experts, hidden], "mlp.gate.e_score_correction_bias": [experts]}
        for part in ("shared_experts", "experts.0"):
            shapes |= {f"mlp.{part}.gate_proj.weight": [width, hidden], f"mlp.{part}.up_proj.weight": [width, hidden],
                       f"mlp.{part}.down_proj.weight": [hidden, width]}
    if layer >= c["num_hidden_layers"]:
        shapes |= {"enorm.weight": [hidden], "hnorm.weight": [hidden], "eh_proj.weight": [hidden, 2 * hidden],
                   "shared_head.norm.weight": [hidden]}
    return shapes


def layer_tensors(c: dict, layer: int) -> dict[str, list[int]]:
    """Name -> shape of one GLM-5 decoder layer (MLA + DSA indexer; dense or MoE MLP; MTP glue on layer 78)."""
    hidden = c["hidden_size"]
    shapes = {"input_layernorm.weight": [hidden], "post_attention_layernorm.weight": [hidden],
              **_mla_with_indexer(c), **_mlp_and_mtp_glue(c, layer)}
    return {f"model.layers.{layer}.{name}": shape for name, shape in shapes.items()}


def glm53_layer_tensors(c: dict, layer: int) -> dict[str, list[int]]:
    """Name -> shape of one GLM-5.3-Flash text layer as its published snapshot names it (SOURCES.md): mHC mixers
    on layers 0-44, KDA attention on `linear_attention` layers, NoPE MLA + indexer on the DSA layers and on MTP
    layer 45, dense MLP on 0-2 and MoE from 3 (routed expert 0 only), the MTP glue on 45."""
    hidden, kda, depth = c["hidden_size"], c["linear_attn_config"], c["num_hidden_layers"]
    shapes = {"input_layernorm.weight": [hidden], "post_attention_layernorm.weight": [hidden]}
    if layer < depth:
        mixer = [(2 + c["hc_mult"]) * c["hc_mult"], c["hc_mult"] * hidden]
        shapes |= {"hc_attn_fn": mixer, "hc_ffn_fn": mixer}
    if layer < depth and c["layer_types"][layer] == "linear_attention":
        width = kda["num_heads"] * kda["head_dim"]
        shapes |= {"self_attn.q_proj.weight": [width, hidden], "self_attn.k_proj.weight": [width, hidden],
                   "self_attn.v_proj.weight": [width, hidden], "self_attn.o_proj.weight": [hidden, width],
                   "self_attn.A_log": [kda["num_heads"]]}
    else:
        shapes |= _mla_with_indexer(c)
    shapes |= _mlp_and_mtp_glue(c, layer)
    return {f"model.language_model.layers.{layer}.{name}": shape for name, shape in shapes.items()}


def glm53_index(c: dict, mtp_shard: str) -> dict:
    """GLM-5.3-Flash's index: one shard per text layer, the MTP layer in `mtp_shard`."""
    t = c["text_config"]
    depth = t["num_hidden_layers"]
    weight_map = {"model.language_model.embed_tokens.weight": "model-00001.safetensors",
                  "model.language_model.norm.weight": mtp_shard, "lm_head.weight": mtp_shard,
                  "model.visual.patch_embed.proj.weight": "model-00001.safetensors"}
    for layer in range(depth + t["num_nextn_predict_layers"]):
        shard = mtp_shard if layer >= depth else f"model-{layer + 2:05d}.safetensors"
        weight_map |= dict.fromkeys(glm53_layer_tensors(t, layer), shard)
    return {"metadata": {"note": "assembled by tests/corpus/assemble.py (see SOURCES.md)"}, "weight_map": weight_map}


def dflash_tensors(c: dict) -> dict[str, list[int]]:
    """Name -> shape of a z-lab DFlash draft checkpoint (Qwen3 layers; no embed_tokens or lm_head: the draft
    shares the target's), the layout SOURCES.md cites."""
    hidden, heads, kv, head = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    width, targets = c["intermediate_size"], len(c["dflash_config"]["target_layer_ids"])
    shapes = {"fc.weight": [hidden, targets * hidden], "hidden_norm.weight": [hidden], "norm.weight": [hidden]}
    for layer in range(c["num_hidden_layers"]):
        shapes |= _qwen3_layer(f"layers.{layer}.", hidden, heads, kv, head, width)
    return shapes


def _qwen3_layer(p: str, hidden: int, heads: int, kv: int, head: int, width: int) -> dict[str, list[int]]:
    """Name -> shape of one Qwen3 decoder layer's tensors (the layers DFlash drafts are made of)."""
    return {p + "input_layernorm.weight": [hidden], p + "post_attention_layernorm.weight": [hidden],
            p + "self_attn.q_proj.weight": [heads * head, hidden], p + "self_attn.k_proj.weight": [kv * head, hidden],
            p + "self_attn.v_proj.weight": [kv * head, hidden], p + "self_attn.o_proj.weight": [hidden, heads * head],
            p + "self_attn.q_norm.weight": [head], p + "self_attn.k_norm.weight": [head],
            p + "mlp.gate_proj.weight": [width, hidden], p + "mlp.up_proj.weight": [width, hidden],
            p + "mlp.down_proj.weight": [hidden, width]}


def speculators_dflash_tensors(c: dict) -> dict[str, list[int]]:
    """Name -> shape of a speculators-format DFlash draft (RedHatAI's Gemma-4 one, SOURCES.md): fc over the
    target's aux states, hidden_norm, norm, a draft-vocabulary lm_head with its d2t/t2d maps, Qwen3-style layers."""
    layer = c["transformer_layer_config"]
    hidden, heads, kv, head = (layer["hidden_size"], layer["num_attention_heads"], layer["num_key_value_heads"],
                               layer["head_dim"])
    width, taps = layer["intermediate_size"], len(c["aux_hidden_state_layer_ids"])
    shapes = {"fc.weight": [hidden, taps * c["target_hidden_size"]], "hidden_norm.weight": [hidden],
              "norm.weight": [hidden], "lm_head.weight": [c["draft_vocab_size"], hidden],
              "d2t": [c["draft_vocab_size"]], "t2d": [layer["vocab_size"]]}
    for n in range(layer["num_hidden_layers"]):
        shapes |= _qwen3_layer(f"layers.{n}.", hidden, heads, kv, head, width)
    return shapes


def eagle3_tensors(c: dict) -> dict[str, list[int]]:
    """Name -> shape of an EAGLE3 head in the SafeAILab/SpecForge layout (one `midlayer` whose attention reads
    [embedding, hidden], fc over three aux states, a draft-vocabulary lm_head with d2t/t2d), plus the
    embed_tokens the checkpoint of vllm#18906 shipped. Sizes follow the config (LlamaConfig defaults where absent)."""
    from transformers import LlamaConfig

    d = LlamaConfig(**{k: v for k, v in c.items() if k not in ("architectures", "draft_vocab_size")})
    hidden, head = d.hidden_size, d.hidden_size // d.num_attention_heads
    q, kv, width = d.num_attention_heads * head, d.num_key_value_heads * head, d.intermediate_size
    p = "midlayer."
    return {"fc.weight": [hidden, 3 * hidden], "norm.weight": [hidden], "lm_head.weight": [c["draft_vocab_size"], hidden],
            "d2t": [c["draft_vocab_size"]], "t2d": [d.vocab_size], "embed_tokens.weight": [d.vocab_size, hidden],
            p + "input_layernorm.weight": [hidden], p + "hidden_norm.weight": [hidden],
            p + "post_attention_layernorm.weight": [hidden],
            p + "self_attn.q_proj.weight": [q, 2 * hidden], p + "self_attn.k_proj.weight": [kv, 2 * hidden],
            p + "self_attn.v_proj.weight": [kv, 2 * hidden], p + "self_attn.o_proj.weight": [hidden, q],
            p + "mlp.gate_proj.weight": [width, hidden], p + "mlp.up_proj.weight": [width, hidden],
            p + "mlp.down_proj.weight": [hidden, width]}


def index(c: dict, layers: range) -> dict:
    weight_map = {"model.embed_tokens.weight": f"model-00001-of-{SHARDS:05d}.safetensors",
                  "model.norm.weight": f"model-{SHARDS:05d}-of-{SHARDS:05d}.safetensors",
                  "lm_head.weight": f"model-{SHARDS:05d}-of-{SHARDS:05d}.safetensors"}
    for layer in layers:
        for name in layer_tensors(c, layer):
            weight_map[name] = f"model-{layer + 1:05d}-of-{SHARDS:05d}.safetensors"
    return {"metadata": {"note": "assembled by tests/corpus/assemble.py (see SOURCES.md)"}, "weight_map": weight_map}


BYTES = {"BF16": 2, "I64": 8, "BOOL": 1}


def header_only(path: Path, tensors: dict[str, list[int]], dtype: str, dtypes: dict[str, str] | None = None) -> None:
    """A safetensors file of the header alone: names, dtypes, shapes and offsets, no weight bytes after it."""
    header, offset = {}, 0
    for name, shape in sorted(tensors.items()):
        kind = (dtypes or {}).get(name, dtype)
        size = BYTES[kind]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": kind, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded)


def write(folder: str, config: dict, layers: range) -> Path:
    out = CONFIGS / folder
    out.mkdir(exist_ok=True)
    if folder != "GLM-5":
        (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (out / "model.safetensors.index.json").write_text(json.dumps(index(config, layers), indent=1) + "\n")
    return out


def main() -> None:
    glm5 = json.loads((CONFIGS / "GLM-5" / "config.json").read_text())
    depth = glm5["num_hidden_layers"]
    write("GLM-5", glm5, range(depth + 1))
    write("GLM-5-without-MTP", glm5, range(depth))
    quark = write("GLM-5-Quark-BF16-MTP", {**glm5, "quantization_config": QUARK}, range(depth + 1))
    mtp = {**layer_tensors(glm5, depth), "lm_head.weight": [glm5["vocab_size"], glm5["hidden_size"]],
           "model.norm.weight": [glm5["hidden_size"]]}
    header_only(quark / f"model-{SHARDS:05d}-of-{SHARDS:05d}.safetensors", mtp, "BF16")
    mtp_shard = "model-mtp.safetensors"
    for folder in ("GLM-5.3-Flash", "GLM-5.3-Flash-NVFP4"):
        glm53 = json.loads((CONFIGS / folder / "config.json").read_text())
        (CONFIGS / folder / "model.safetensors.index.json").write_text(json.dumps(glm53_index(glm53, mtp_shard),
                                                                                  indent=1) + "\n")
    text = glm53["text_config"]
    hidden = text["hidden_size"]
    header_only(CONFIGS / "GLM-5.3-Flash-NVFP4" / mtp_shard,
                {**glm53_layer_tensors(text, text["num_hidden_layers"]), "lm_head.weight": [text["vocab_size"], hidden],
                 "model.language_model.norm.weight": [hidden]}, "BF16")
    dflash = CONFIGS / "Qwen3-8B-DFlash-b16"
    header_only(dflash / "model.safetensors", dflash_tensors(json.loads((dflash / "config.json").read_text())), "BF16")
    eagle3 = CONFIGS / "EAGLE3-LLaMA3.1-8B-with-embed_tokens"
    header_only(eagle3 / "model.safetensors", eagle3_tensors(json.loads((eagle3 / "config.json").read_text())), "BF16",
                {"d2t": "I64", "t2d": "BOOL"})
    gemma = CONFIGS / "gemma-4-31B-it-speculator.dflash"
    header_only(gemma / "model.safetensors", speculators_dflash_tensors(json.loads((gemma / "config.json").read_text())),
                "BF16", {"d2t": "I64", "t2d": "BOOL"})


if __name__ == "__main__":
    main()
