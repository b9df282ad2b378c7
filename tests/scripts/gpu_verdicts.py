"""gpu-check's pass/fail rules, pure Python (tested on the CPU): greedy consistency and packing A/B.

Why the greedy rule cannot flake on correct code: with temperature 0 the verifier emits the target's own argmax at
every position, so speculation can change a token only through floating-point differences between the two runs
(other batch shapes, the verifier scoring several positions at once). Those move a logit by far less than
TIE_NATS; a different argmax then needs the base run's best two tokens within that distance of each other. So a
divergence is accepted only where the base run's own top-2 logprobs show such a near-tie *and* the speculative run
picked the runner-up; from there on the two texts legitimately differ and that request is not compared further.
Anything else (another token, a wide margin, a different length) is a real change of the output.
"""

from __future__ import annotations

# bf16 logits of the sharpened lm_head reach tens of nats; their rounding and accumulation-order noise is a few
# tenths at most. A real bug (a wrong KV block, a wrong position) moves the argmax by whole nats.
TIE_NATS = 0.5


def greedy_verdict(base: list[list[int]], top2: list[list[list]], spec: list[list[int]]) -> dict:
    """Compare each request's speculative tokens with the base run's: {compared, total, near_ties, problems}."""
    compared = total = 0
    near_ties, problems = [], []
    for request, (ours, theirs, tops) in enumerate(zip(base, spec, top2)):
        total += len(ours)
        if len(ours) != len(theirs):
            problems.append(f"request {request}: {len(theirs)} tokens with speculation, {len(ours)} without")
            continue
        for position, (want, got) in enumerate(zip(ours, theirs)):
            if want == got:
                compared += 1
                continue
            (best, best_lp), (second, second_lp) = tops[position][:2]
            margin = best_lp - second_lp
            if got == second and margin <= TIE_NATS:
                near_ties.append(f"request {request} token {position}: near-tie ({margin:.3f} nats)")
            else:
                problems.append(f"request {request} token {position}: {got} instead of {want} "
                                f"(base margin {margin:.3f} nats)")
            break
    if len(base) != len(spec):
        problems.append(f"{len(spec)} requests answered with speculation, {len(base)} without")
    return {"compared": compared, "total": total, "near_ties": near_ties, "problems": problems}


def packing_verdict(packed: dict, unpacked: dict) -> list[str]:
    """The engine's own KV groups: a packed draft window group on, none off; prompts long enough to use it."""
    problems = []
    drafts_on = [g for g in packed["kv_groups"] if g["draft"]]
    drafts_off = [g for g in unpacked["kv_groups"] if g["draft"]]
    if not drafts_on or not drafts_off:
        return ["the engine planned no all-draft KV group (nothing to pack)"]
    on, off = drafts_on[0]["block_size"], drafts_off[0]["block_size"]
    if on <= off:
        problems.append(f"draft group not packed: {on} tokens per block, {off} with packing off")
    window = drafts_on[0].get("window") or 0
    shortest = min(packed["prompt_lengths"])
    if shortest < 3 * on or shortest <= window:
        problems.append(f"prompts from {shortest} tokens do not span 3 packed draft blocks ({on}) and the window "
                        f"({window})")
    return problems
