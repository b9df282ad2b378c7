"""gpu-check's pass/fail rules, pure Python (tested on the CPU): greedy, speculation, packing, prefix cache, KV pools.

Why the greedy rule cannot flake on correct code: with temperature 0 the verifier emits the target's own argmax at
every position, so speculation can change a token only through floating-point differences between the two runs
(other batch shapes, the verifier scoring several positions at once). The lm_head runs in fp32
(hf_overrides head_dtype=float32, honoured by vLLM 0.33.0's LogitsProcessor), so logits are not rounded to bf16's
0.5-nat steps; what differs between runs is the bf16 hidden state, which moves a logit by a few hundredths of a
nat (tests/test_gpu_check.py simulates it). A different argmax then needs the base run's best tokens within
TIE_NATS of each other. So a divergence is accepted only where the token taken is one of the base run's top-k
(k = 5) within TIE_NATS of its best *and* that position is a near-tie; from there on the two texts legitimately
differ and that request is not compared further. Anything else (another token, a wide margin, a different
length) is a real change of the output.
Why the speculation rule cannot pass a drafter that does nothing: under constructed weights (gpu_constructed.py)
target and drafter compute the same next-token map, so every draft must be accepted; the floor is FLOOR_SHARE of
k accepted tokens per draft, and the engine's own counters are read.
"""

from __future__ import annotations

# The lm_head in fp32 leaves the bf16 hidden states as the only run-to-run noise: a few hundredths of a nat at the
# logit spread sharpen() gives (about sqrt(hidden) nats). A real bug moves the argmax by whole nats.
TIE_NATS = 0.5
# Constructed weights: each draft of k tokens must have at least this share accepted on average (1.0 expected;
# requests that end mid-draft take a little off).
FLOOR_SHARE = 0.9
# Prefix caching on may not lose more than this share of accepted tokens per draft against it being off.
PREFIX_MARGIN = 0.05
# sharpen() gives logits a spread of tens of nats; dummy weights leave thousandths. A median top-2 gap under this
# means the re-initialisation did not reach the logits.
SHARP_NATS = 1.0


def greedy_verdict(base: list[list[int]], topk: list[list[list]], spec: list[list[int]]) -> dict:
    """Compare each request's speculative tokens with the base run's: {compared, total, near_ties, problems}."""
    compared = total = 0
    near_ties, problems = [], []
    for request, (ours, theirs, tops) in enumerate(zip(base, spec, topk)):
        total += len(ours)
        if len(ours) != len(theirs):
            problems.append(f"request {request}: {len(theirs)} tokens with speculation, {len(ours)} without")
            continue
        for position, (want, got) in enumerate(zip(ours, theirs)):
            if want == got:
                compared += 1
                continue
            best = tops[position][0][1]
            tied = {token: best - lp for token, lp in tops[position] if best - lp <= TIE_NATS}
            if got in tied:
                near_ties.append(f"request {request} token {position}: near-tie ({tied[got]:.3f} nats)")
            else:
                margin = best - tops[position][1][1]
                problems.append(f"request {request} token {position}: {got} instead of {want} "
                                f"(base margin {margin:.3f} nats)")
            break
    if len(base) != len(spec):
        problems.append(f"{len(spec)} requests answered with speculation, {len(base)} without")
    return {"compared": compared, "total": total, "near_ties": near_ties, "problems": problems}


def sharpness_problems(base: dict) -> list[str]:
    """The base run's lm_head must have been re-initialised, and its logits must show it."""
    if not base.get("sharpened"):
        return ["the lm_head was not re-initialised (sharpen found nothing)"]
    gaps = sorted(step[0][1] - step[1][1] for request in base["topk"] for step in request if len(step) > 1)
    median = gaps[len(gaps) // 2] if gaps else 0.0
    if median < SHARP_NATS:
        return [f"median top-2 gap {median:.4f} nats: the lm_head re-initialisation did not reach the logits"]
    return []


def speculation_problems(run: dict, speculator: str | None, k: int | None = None, floor: bool = False) -> list[str]:
    """Drafts were proposed by the expected class; under constructed weights, accepted up to the floor."""
    problems = []
    if speculator and run.get("speculator") != speculator:
        problems.append(f"drafted by {run.get('speculator')}, not {speculator}")
    drafts = run.get("drafts") or 0
    if drafts <= 0:
        return problems + ["no drafts were proposed (speculation silently off)"]
    if floor:
        per_draft = (run.get("accepted") or 0) / drafts
        if per_draft < FLOOR_SHARE * k:
            problems.append(f"{per_draft:.2f} tokens accepted per draft, floor {FLOOR_SHARE * k:.2f} "
                            f"(k = {k}, target and drafter agree by construction)")
    return problems


def constructed_problems(run: dict, continuation) -> list[str]:
    """Every request's tokens are exactly the constructed map walked from its prompt (no tie tolerance)."""
    problems = []
    for request, (prompt, tokens) in enumerate(zip(run["prompts"], run["tokens"])):
        want = continuation(prompt, len(tokens))
        if tokens != want:
            first = next(i for i, (a, b) in enumerate(zip(tokens, want)) if a != b)
            problems.append(f"request {request} token {first}: {tokens[first]} instead of {want[first]}")
    return problems


def prefix_cache_problems(on: dict, off: dict) -> list[str]:
    """Same prompts with repeated prefixes: caching must hit, and acceptance may not drop beyond the margin."""
    problems = []
    if not on.get("prefix_cache_hits"):
        problems.append("prefix caching on, but no prefix-cache hit (the prompts did not exercise it)")
    if not on.get("drafts") or not off.get("drafts"):
        return problems + ["no drafts with prefix caching on or off"]
    rate_on, rate_off = on["accepted"] / on["draft_tokens"], off["accepted"] / off["draft_tokens"]
    if rate_on < rate_off - PREFIX_MARGIN:
        problems.append(f"acceptance {rate_on:.3f} with prefix caching on, {rate_off:.3f} off "
                        f"(margin {PREFIX_MARGIN})")
    return problems


def packing_verdict(packed: dict, unpacked: dict, min_prompt: bool = True) -> list[str]:
    """The engine's own KV groups: a packed draft group on, the stock plan off; prompts long enough to use it."""
    problems = []
    drafts_on = [g for g in packed["kv_groups"] if g["draft"]]
    drafts_off = [g for g in unpacked["kv_groups"] if g["draft"]]
    if not drafts_on or not drafts_off:
        return ["the engine planned no all-draft KV group (nothing to pack)"]
    on, off = drafts_on[0]["block_size"], drafts_off[0]["block_size"]
    if on <= off:
        problems.append(f"draft group not packed: {on} tokens per block, {off} with packing off")
    window = drafts_on[0].get("window") or 0
    shortest = min(len(p) for p in packed["prompts"])
    if min_prompt and (shortest < 3 * on or shortest <= window):
        problems.append(f"prompts from {shortest} tokens do not span 3 packed draft blocks ({on}) and the window "
                        f"({window})")
    return problems


# What the fork logs when the scheduler's coordinator installs carved pools (vllm/_fork/kv_pools_blocks.py).
POOLS_LOG = "KV pools per page size: KV groups"
# The groups of a GLM-5.3-Flash + DFlash2 plan whose pages are narrower than the shared stride.
POOLED_GROUPS = {"the draft group": lambda g: g["draft"], "the tail ring": lambda g: g["kind"] == "CircularBufferSpec",
                 "a KDA group": lambda g: g["kind"] == "MambaSpec"}


def pools_plan_problems(on: dict, off: dict) -> list[str]:
    """Two scheduler KV configs (gpu_engine.kv_config): carved pools, and stock's plan under the off switch."""
    problems = []
    slots = [g["slots"] for g in on["groups"]]
    if on["type"] != "PooledKVCacheConfig":
        problems.append(f"pools on: the scheduler's KV config is a {on['type']}, not a PooledKVCacheConfig")
    for what, matches in POOLED_GROUPS.items():
        if not any(matches(g) and g["slots"] > 1 for g in on["groups"]):
            problems.append(f"pools on: {what} is not carved (slots per block by group {slots})")
    if off["type"] != "KVCacheConfig" or any(g["slots"] > 1 for g in off["groups"]):
        problems.append(f"VLLM_FORK_DISABLE_KV_PACKING=1 ignored: a {off['type']} with slots "
                        f"{[g['slots'] for g in off['groups']]}")
    if on["num_blocks"] != off["num_blocks"]:
        problems.append(f"{on['num_blocks']} shared blocks with pools, {off['num_blocks']} without (must be equal)")
    for key in ("kv_cache_max_concurrency", "kv_cache_size_tokens"):
        if not (on[key] or 0) > (off[key] or 0):
            problems.append(f"{key} {on[key]} with pools, not above {off[key]} without")
    return problems


AUTO_LOG = "KV pools' start-up self-test passed on"


def auto_plan_problems(on: dict, off: dict) -> list[str]:
    """Two scheduler KV configs: some group carved (what the default carves once its self-test passes), stock's
    under the off switch, the same shared blocks, more KV tokens."""
    slots = [g["slots"] for g in on["groups"]]
    problems = [] if on["type"] == "PooledKVCacheConfig" and max(slots) > 1 else [
        f"no group carved: a {on['type']} with slots per block {slots}"]
    if off["type"] != "KVCacheConfig" or any(g["slots"] > 1 for g in off["groups"]):
        problems.append(f"VLLM_FORK_DISABLE_KV_PACKING=1 ignored: a {off['type']} with slots "
                        f"{[g['slots'] for g in off['groups']]}")
    if on["num_blocks"] != off["num_blocks"] or not (on["kv_cache_size_tokens"] or 0) > (off["kv_cache_size_tokens"]
                                                                                         or 0):
        problems.append(f"{on['num_blocks']} shared blocks and {on['kv_cache_size_tokens']} KV tokens carved, "
                        f"{off['num_blocks']} and {off['kv_cache_size_tokens']} stock (same blocks, more tokens)")
    return problems


def auto_pools_verdict(on: dict, off: dict) -> list[str]:
    """The default's A/B: the self-test passed on this GPU's kernels and the plan is carved; stock's without."""
    problems = [f"pools (auto): {p}" for p in auto_plan_problems(on["kv_config"], off["kv_config"])]
    if AUTO_LOG not in on.get("log_text", ""):
        warned = [line for line in on.get("log_text", "").splitlines() if "KV pools not carved" in line]
        problems.append(f"pools (auto): no log line '{AUTO_LOG} ...'" + (f"; it says: {warned[0]}" if warned else ""))
    return problems


def pools_verdict(on: dict, off: dict) -> list[str]:
    """Both engines of the pools A/B: their KV configs, the log line, and the same prefix-cache hits."""
    problems = pools_plan_problems(on["kv_config"], off["kv_config"])
    if POOLS_LOG not in on.get("log_text", ""):
        problems.append(f"pools on: no log line '{POOLS_LOG} ...'")
    if POOLS_LOG in off.get("log_text", ""):
        problems.append(f"VLLM_FORK_DISABLE_KV_PACKING=1 ignored: the log says '{POOLS_LOG} ...'")
    if not on.get("prefix_cache_hits"):
        problems.append("pools on: no prefix-cache hit (the shared-prefix prompts did not exercise it)")
    rate = lambda r: (r.get("prefix_cache_hits") or 0) / (r.get("prefix_cache_queries") or 1)  # noqa: E731
    if (on.get("prefix_cache_hits"), on.get("prefix_cache_queries")) != (off.get("prefix_cache_hits"),
                                                                         off.get("prefix_cache_queries")):
        problems.append(f"prefix-cache hit rate {rate(on):.4f} with pools ({on.get('prefix_cache_hits')} of "
                        f"{on.get('prefix_cache_queries')} tokens), {rate(off):.4f} without "
                        f"({off.get('prefix_cache_hits')} of {off.get('prefix_cache_queries')})")
    return problems
