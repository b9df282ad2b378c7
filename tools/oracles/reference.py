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


def _hidden_states(model, ids: torch.Tensor):
    """The decoder's hidden states for a text-only prompt (Qwen-Omni: its thinker, which vLLM serves)."""
    runner = getattr(model, "thinker", model)
    out = runner(input_ids=ids, output_hidden_states=True, use_cache=False)
    return out.hidden_states


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
        record["config"] = True
        from safetensors.torch import save_file

        # One tensor per index: hyper-connection models report [tokens, streams * hidden] inside the stack.
        tensors = {f"state.{i}": s[0].float().contiguous() for i, s in enumerate(states)}
        save_file(tensors | {"prompt": torch.tensor(PROMPT)}, str(out / REFERENCE))
        record |= {"reference": True, "states": len(states), "hf_class": cls.__name__}
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
