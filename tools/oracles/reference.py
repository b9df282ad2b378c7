"""Hugging Face's side of the hidden-state oracle: a tiny random checkpoint written by transformers, and its states.

Usage: python reference.py OUT ARCH [ARCH ...]   (in an environment with the pinned transformers)
For each architecture transformers implements, OUT/<arch>/ gets the checkpoint (save_pretrained: config.json and
safetensors, as a user's checkpoint) and reference.states (safetensors): `output_hidden_states` of the model's own forward on
PROMPT, one tensor `state.<index>` each ([tokens, hidden]; hyper-connection models: [tokens, streams * hidden]). OUT/<arch>/reference.json says what was done, or why not.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from configs import reference_class, tiny_config  # noqa: E402

# Safetensors under a name vLLM's loader does not glob (*.safetensors would be read as weights).
REFERENCE = "reference.states"
PROMPT = [1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 300, 11]
SEED = 0


# transformers' own convention (huggingface/transformers#2461), which EAGLE3 trainers and vLLM's aux layer ids
# follow: hidden_states[0] is the stream entering the first layer, [i] the one entering layer i, the last after
# the final norm. Its Mamba classes report each block's output and then the final norm's instead: no entry for the
# stream entering the first block, every other index one layer later.
BLOCK_OUTPUTS = ("MambaForCausalLM", "Mamba2ForCausalLM", "FalconMambaForCausalLM")
REALIGNED = "states realigned: its hidden_states are the blocks' outputs"


def _hidden_states(model, ids: torch.Tensor):
    """The decoder's hidden states for a text-only prompt (Qwen-Omni: its thinker, which vLLM serves)."""
    runner = getattr(model, "thinker", model)
    if type(runner).__name__ in BLOCK_OUTPUTS:
        return _in_the_usual_layout(runner, ids)
    out = runner(input_ids=ids, output_hidden_states=True, use_cache=False)
    return out.hidden_states


def _in_the_usual_layout(model, ids: torch.Tensor) -> tuple:
    """A Mamba model's states as transformers' other models report them: the stream entering the first block
    (what the block's forward received), the outputs of all blocks but the last, then the final norm's output."""
    entering = []
    hook = model.base_model.layers[0].register_forward_pre_hook(lambda block, args: entering.append(args[0]))
    try:
        states = model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
    finally:
        hook.remove()
    return (entering[0], *states[:-2], states[-1])


def write_tokenizer(out: Path, vocab: int) -> None:
    """A word-level tokenizer over the whole vocabulary (ids 0-4 special): the engine's multimodal processors
    are built with one even for token-id prompts."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<bos>", "<eos>", "<unk>", "<mask>"]
    words = {token: i for i, token in enumerate(special)} | {f"w{i}": i for i in range(len(special), vocab)}
    core = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                            unk_token="<unk>", mask_token="<mask>").save_pretrained(str(out))


# transformers 5.20 reverses both of Qwen2-Audio's renamings on save (the model type's and Qwen2AudioModel's), so
# its own checkpoint says `language_model.model.model.*`, which neither it nor a published checkpoint uses.
DOUBLED, PUBLISHED = "language_model.model.model.", "language_model.model."


def _undo_double_renaming(out: Path) -> None:
    """Tensor names as published checkpoints (and transformers' own loader) have them."""
    from safetensors.torch import load_file, save_file

    for shard in out.glob("*.safetensors"):
        tensors = load_file(str(shard))
        if any(name.startswith(DOUBLED) for name in tensors):
            save_file({name.replace(DOUBLED, PUBLISHED, 1) if name.startswith(DOUBLED) else name: t
                       for name, t in tensors.items()}, str(shard), metadata={"format": "pt"})


def _name_the_architecture(out: Path, arch: str) -> None:
    """config.json names `arch`, not the Hugging Face class that wrote it: save_pretrained writes its own class
    name, so an alias's checkpoint (MiMo written by Qwen2's class) would make vLLM build the other class."""
    path = out / "config.json"
    config = json.loads(path.read_text())
    if config.get("architectures") != [arch]:
        path.write_text(json.dumps(config | {"architectures": [arch]}, indent=2, sort_keys=True) + "\n")


def write(arch: str, out: Path) -> dict:
    """Checkpoint (or, without a Hugging Face model, config.json) and reference states of one architecture; the
    returned record is also written as JSON."""
    import transformers

    record = {"arch": arch, "transformers": transformers.__version__, "config": False, "reference": False}
    cls = reference_class(arch)
    started = time.time()
    try:
        config = tiny_config(arch)
        record["config_class"] = type(config).__name__
        write_tokenizer(out, config.get_text_config().vocab_size)
        if cls is None:
            config.save_pretrained(str(out))
            return record | {"config": True, "reason": f"transformers {transformers.__version__} does not "
                                                         f"implement {arch}"}
        torch.manual_seed(SEED)
        model = cls(config).eval().float()
        with torch.no_grad():
            states = _hidden_states(model, torch.tensor([PROMPT]))
        model.save_pretrained(str(out))
        _undo_double_renaming(out)
        _name_the_architecture(out, arch)
        record["config"] = True
        from safetensors.torch import save_file

        # One tensor per index: hyper-connection models report [tokens, streams * hidden] inside the stack.
        tensors = {f"state.{i}": s[0].float().contiguous() for i, s in enumerate(states)}
        save_file(tensors | {"prompt": torch.tensor(PROMPT)}, str(out / REFERENCE))
        record |= {"reference": True, "states": len(states), "hf_class": cls.__name__}
        if cls.__name__ in BLOCK_OUTPUTS:
            record["realigned"] = REALIGNED
    except Exception as exc:  # noqa: BLE001 - the record says why this architecture has no reference
        text = str(exc).strip()
        record |= {"reason": f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}",
                   "traceback": traceback.format_exc()[-2000:]}
    finally:
        record["seconds"] = round(time.time() - started, 2)
    return record


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    for arch in argv[1:]:
        out = root / arch
        out.mkdir(parents=True, exist_ok=True)
        record = write(arch, out)
        (out / "reference.json").write_text(json.dumps(record, indent=1))
        print(f"{arch}: {'ok' if record['reference'] else record.get('reason')}"
              f"{'' if record['reference'] or not record['config'] else ' (config written)'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
