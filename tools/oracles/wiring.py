"""Which modules a drafter's embedding and LM head are, judged by the target's own forward, not by the loader.

The V2 loader oracle builds target and drafter on the meta device. Building without raising does not show that
the drafter got the right modules: a lookup that hands it the target's final norm builds just as well. So the
target itself says which module embeds its tokens (the embedding of the hidden width that runs in its
`embed_input_ids`) and which is its LM head (the head its `compute_logits` hands the logits processor); the drafter's modules must be
those very modules where shared, or its own ones of the same shape. Meta tensors carry no storage: sharing is
module identity.
"""

from __future__ import annotations

from contextlib import ExitStack

SHARED, OWN, NONE, WRONG, UNKNOWN = "target's", "own", "none", "wrong", "unknown"


def _qualified(target, module) -> str:
    name = next((n for n, m in target.named_modules() if m is module), "?")
    return f"{name or 'self'} ({type(module).__name__})"


def _called(target, kinds: tuple[type, ...], run, pre: bool = False) -> list:
    """The modules of `kinds` in `target` whose forward `run()` calls, in call order, each with its output (a
    pre-hook sees LogitsProcessor's first argument, the head it is handed, instead)."""
    seen: list = []
    with ExitStack() as hooks:
        for module in target.modules():
            if isinstance(module, kinds):
                if pre:
                    handle = module.register_forward_pre_hook(lambda m, args: seen.append((args[0], None)))
                else:
                    handle = module.register_forward_hook(lambda m, args, out: seen.append((m, out)))
                hooks.callback(handle.remove)
        run()
    return seen


def targets_own(target, hidden: int, dtype) -> tuple[object, object]:
    """(input embedding, LM head) as the target's own forward uses them, on the meta device. The embedding is the
    first one that runs with the hidden width: Gemma-3n/4 also look up per-layer embeddings of another width."""
    import torch
    from torch import nn
    from vllm.model_executor.layers.logits_processor import LogitsProcessor
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    ids = torch.zeros(3, dtype=torch.long, device="meta")
    ran = _called(target, (VocabParallelEmbedding, nn.Embedding), lambda: target.embed_input_ids(ids))
    embedding = next((m for m, out in ran if out.shape[-1] == hidden), None)
    states = torch.zeros(3, hidden, dtype=dtype, device="meta")
    heads = _called(target, (LogitsProcessor,), lambda: target.compute_logits(states), pre=True)
    return embedding, heads[0][0] if heads else None


def judge(target, draft_module, reference, what: str) -> list[str]:
    """[verdict, detail] for one drafter module against the target's own module of that role."""
    if draft_module is None:
        return [NONE, f"the drafter has no {what}"]
    if any(m is draft_module for m in target.modules()):
        if reference is None:
            return [UNKNOWN, f"shares {_qualified(target, draft_module)}; the target's own {what} was not found"]
        if draft_module is reference:
            return [SHARED, _qualified(target, reference)]
        return [WRONG, f"the drafter's {what} is the target's {_qualified(target, draft_module)}, not its {what} "
                       f"{_qualified(target, reference)}"]
    mine, theirs = getattr(draft_module, "weight", None), getattr(reference, "weight", None)
    if mine is not None and theirs is not None and mine.shape[-1] != theirs.shape[-1]:
        return [WRONG, f"the drafter's own {what} is {tuple(mine.shape)} wide, the target's {tuple(theirs.shape)}"]
    return [OWN, type(draft_module).__name__]


def wiring(vc, target, draft) -> dict:
    """{"embedding": [verdict, detail], "lm_head": [...]} of the drafter over this target."""
    from vllm.config import set_current_vllm_config

    import gpu_dry_build

    hidden = vc.model_config.get_hidden_size()
    try:
        with set_current_vllm_config(vc), gpu_dry_build._on_meta():
            embedding, head = targets_own(target, hidden, vc.model_config.dtype)
    except Exception as exc:  # noqa: BLE001 - a forward meta tensors cannot run: the check cannot decide
        reason = f"the target's own forward does not run on meta tensors ({type(exc).__name__}: {str(exc)[:120]})"
        return {"embedding": [UNKNOWN, reason], "lm_head": [UNKNOWN, reason]}
    inner = getattr(draft, "model", draft)
    return {"embedding": judge(target, getattr(inner, "embed_tokens", None), embedding, "input embedding"),
            "lm_head": judge(target, getattr(draft, "lm_head", None), head, "LM head")}
