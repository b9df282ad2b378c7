"""Aux hidden states against Hugging Face's `output_hidden_states`, index by index, with the tolerance and why.

Both sides run in float32 on the CPU from the same safetensors. What differs is the order of floating-point sums
(fused QKV and gate/up projections, vLLM's CPU attention kernel against PyTorch SDPA, fused add + RMSNorm) and the
odd activation written another way (Apertus' xIELU: 5e-4), which moves a state by 1e-6 to 1e-3 of its scale. A
wrong capture moves it by a whole layer's contribution: the stream without its residual, one layer early or late,
a single hyper-connection stream instead of their mean (measured: 0.3 to 0.9 of the scale between neighbouring
layers). So a state passes when its largest error is below RTOL of its largest magnitude and its neighbouring
layers' states differ from it by more than SEPARATION x RTOL: otherwise a capture one layer off could pass too, and
the comparison says it cannot decide.

The labels are checked, not positions: the engine chooses the sparse, irregular layers drafters choose (EAGLE3's
defaults 2, L // 2 and L - 3, the first layer's input 0 and the last compared index), so a capture that records
a layer early or late hands over states whose labels point at the wrong reference, or the wrong number of them.
"""

from __future__ import annotations

RTOL = 1e-2  # of the state's largest magnitude: 20x above the largest kernel difference seen, 30x below a slip
SEPARATION = 10  # a neighbour closer than 10 x RTOL could hide an off-by-one capture


def aux_labels(layers: int, with_zero: bool = True) -> list[int]:
    """The aux layer indices the state oracle asks a target of `layers` layers for (sorted, as the runner hands
    them over): EAGLE3's defaults, index 0 and the last index Hugging Face reports before its final norm."""
    chosen = {2, layers // 2, layers - 3, layers - 1} | ({0} if with_zero else set())
    return sorted(i for i in chosen if 0 <= i < layers)


def _streams(reference, hidden: int):
    """Hyper-connection models report [tokens, streams * hidden] between layers; the fork's (and GLM-5.3-Flash's
    upstream) capture hands drafters the mean of the streams."""
    width = reference.shape[-1]
    if width != hidden and width % hidden == 0:
        return reference.unflatten(-1, (width // hidden, hidden)).mean(dim=-2)
    return reference


def _relative(a, b) -> float:
    scale = float(b.abs().max()) or 1.0
    return float((a - b).abs().max()) / scale


def compare(aux: dict[int, object], reference: list) -> dict:
    """Per chosen layer index: relative error to Hugging Face's state at that index and to its neighbours.

    `aux` maps the layer index to vLLM's state [tokens, hidden]; `reference[i]` is HF's hidden_states[i]. The
    last HF state is after the final norm, vLLM's state at that index before it: only indices below the last
    are compared."""
    last = len(reference) - 1
    rows = {}
    for index, state in sorted(aux.items()):
        if index >= last:
            rows[index] = {"compared": False, "why": "Hugging Face reports the last state after the final norm"}
            continue
        hidden = state.shape[-1]
        expected = _streams(reference[index], hidden)
        if expected.shape != state.shape:
            rows[index] = {"compared": True, "ok": False,
                           "why": f"shape {tuple(state.shape)} against Hugging Face's {tuple(expected.shape)}"}
            continue
        error = _relative(state, expected)
        neighbours = [_relative(state, _streams(reference[i], hidden)) for i in (index - 1, index + 1)
                      if 0 <= i < last and _streams(reference[i], hidden).shape == state.shape]
        nearest = min(neighbours) if neighbours else None
        rows[index] = {"compared": True, "ok": error <= RTOL, "error": error, "neighbour": nearest,
                       "separates": nearest is not None and nearest > SEPARATION * RTOL}
    return rows


def verdict(rows: dict) -> tuple[bool | None, str]:
    """(passed, why): None when nothing could be compared, or a matching state is as near a neighbour's."""
    compared = {i: r for i, r in rows.items() if r.get("compared")}
    if not compared:
        return None, "no aux index below the last was chosen"
    failed = {i: r for i, r in compared.items() if not r["ok"]}
    if failed:
        index, row = next(iter(failed.items()))
        detail = row.get("why") or f"relative error {row['error']:.2e} > {RTOL:.0e}"
        return False, f"aux state {index}: {detail}"
    blurred = {i: r for i, r in compared.items() if not r["separates"]}
    if blurred:
        index, row = next(iter(blurred.items()))
        near = "no neighbour to compare" if row["neighbour"] is None else f"a neighbour within {row['neighbour']:.1e}"
        return None, f"aux state {index} matches, but with {near} (< {SEPARATION * RTOL:.0e}) a capture one " \
                     f"layer off could match too"
    worst = max(r["error"] for r in compared.values())
    return True, f"{len(compared)} states within {worst:.1e} (tolerance {RTOL:.0e})"
