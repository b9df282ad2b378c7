"""The KV plan as spec-check prints it: a table of the groups, and the warnings where capacity is lost."""

from __future__ import annotations

from vllm._fork.spec_check.findings import WARN, Finding
from vllm._fork.spec_check.kv_groups import (
    DRAFT_SHARE_WARNING,
    GROUP_COUNT_WARNING,
    NAME,
    PADDING_SHARE_WARNING,
    Breakdown,
)

MIB = 1 << 20


def group_table(plan: Breakdown) -> tuple[str, ...]:
    """One line per group at the plan's request length (stored: its layers' unpadded pages in one block id), and the
    request's totals."""
    lines = [f"per request of {plan.length:,} tokens (a block id is {plan.block_bytes:,} B of the shared "
             f"allocation):",
             f"{'group':>5}  {'kind':<26}{'layers':>7}{'block':>7}{'stored B':>12}{'blocks':>9}{'MiB':>10}"
             f"{'share':>8}{'padding':>9}"]
    total = plan.bytes_per_request
    for index, row in enumerate(plan.groups):
        whose = "" if not row.draft else " (draft)" if row.draft_used_bytes_per_block == row.used_bytes_per_block \
            else f" ({row.draft_used_bytes_per_block / row.used_bytes_per_block:.0%} draft)"
        kind = row.kind + whose + (" (host)" if row.host_resident else "")
        padding = 1 - row.used_bytes_per_block / plan.block_bytes if plan.block_bytes else 0.0
        states = f"  incl. {row.speculative_blocks} per draft position" if row.speculative_blocks else ""
        lines.append(f"{index:>5}  {kind:<26}{row.layers:>7}{row.block_size:>7}{row.used_bytes_per_block:>12,}"
                     f"{row.blocks:>9,}{row.bytes / MIB:>10.1f}{row.bytes / total if total else 0:>8.1%}"
                     f"{padding:>9.1%}{states}")
    lines.append(f"total {total / MIB:,.1f} MiB in {len(plan.groups)} groups: padding "
                 f"{plan.share(plan.padding_bytes):.1%}, the draft's layers {plan.share(plan.draft_bytes):.1%}, "
                 f"recurrent states per draft position {plan.share(plan.speculative_state_bytes):.1%}")
    return tuple(lines)


def _draft_warning(plan: Breakdown, replayssm: bool) -> Finding | None:
    draft, states = plan.share(plan.draft_bytes), plan.share(plan.speculative_state_bytes)
    if draft + states < DRAFT_SHARE_WARNING:
        return None
    fixes = []
    if states and replayssm:
        fixes.append("--use-replayssm (the line below says what it gives)")
    if states:
        fixes.append("fewer speculative tokens (each adds one state block to every recurrent group)")
    if draft:
        fixes.append("fp8 KV for the draft (speculative config kv_cache_dtype)")
    return Finding(NAME, WARN, f"the draft costs {draft + states:.0%} of each {plan.length:,}-token request's KV "
                   f"(its own layers {draft:.0%}, the target's recurrent states per draft position {states:.0%}); "
                   f"warned from {DRAFT_SHARE_WARNING:.0%}", "; or ".join(fixes))


def capacity_findings(plans: list[Breakdown], replayssm: bool) -> list[Finding]:
    """Warnings where the draft, padding or the number of groups cost capacity, at the deployment's length;
    `replayssm`: the target could take --use-replayssm and the deployment does not set it."""
    plan = plans[0]
    found = [_draft_warning(plan, replayssm)]
    padding = plan.share(plan.padding_bytes)
    if padding >= PADDING_SHARE_WARNING:
        found.append(Finding(NAME, WARN, f"{padding:.0%} of each {plan.length:,}-token request's KV is padding: every "
                             f"block id costs {plan.block_bytes:,} B whatever its group's pages; warned from "
                             f"{PADDING_SHARE_WARNING:.0%}",
                             "a --block-size or --kv-cache-dtype whose pages fill the block better (the table shows "
                             "each group's padding), or fewer speculative tokens"))
    if len(plan.groups) >= GROUP_COUNT_WARNING:
        found.append(Finding(NAME, WARN, f"{len(plan.groups)} KV groups: each group keeps its own block table and "
                             f"attention metadata every step; warned from {GROUP_COUNT_WARNING}",
                             "no flag merges groups; a draft whose layer types match the target's adds none"))
    return [f for f in found if f is not None]
