"""Engine of the sparse vLLM fork: pinned upstream + overlay + declarative edits -> wheel, tree, patches."""
