"""The prefix-cache draft-view measurement (benchmarks/prefix_cache_draft) on vLLM's own Scheduler and KV manager."""

from __future__ import annotations


import pytest


import draft_view


@pytest.fixture(scope="module")
def views() -> dict:
    return {caching: {v.name: v for v in draft_view.measure(caching, None)} for caching in (False, True)}


def test_a_miss_computes_every_position_itself(views):
    for view in views[False].values():
        assert (view.hit, view.aux_from, view.from_cache, view.stale) == (0, 0, 0, 0)
        assert view.written_now == view.needed == view.prompt


def test_a_hit_reads_draft_kv_its_donor_wrote_for_the_same_tokens(views):
    hits = [v for v in views[True].values() if v.hit]
    assert {v.name for v in hits} == {"b", "c", "a-turn2"}  # the shared system prompt, then the whole first turn
    for view in hits:
        # The target computes aux states only for the uncached suffix; the draft's attention still finds every
        # earlier position in cached blocks that a request with the same tokens filled.
        assert view.aux_from == view.hit and view.hit % 16 == 0
        assert (view.from_cache, view.written_now, view.stale) == (view.hit, view.prompt - view.hit, 0)
        assert view.shared_blocks


def test_the_measure_sees_a_cached_block_nobody_wrote():
    engine = draft_view.Engine(True, None)
    prompt = list(range(10, 1010))
    engine.run("donor", prompt)
    blocks = {b for b in engine.written if b}
    engine.written[min(blocks)] = 0  # as if the draft had skipped the donor's first block
    view = engine.run("reader", prompt[:800] + list(range(2000, 2100)))
    assert view.hit == 800 and view.stale == 16
