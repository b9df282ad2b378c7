#!/usr/bin/env bash
# gpu-check inside upstream's image (the pipeline's GPU step): the fork wheel over the image's vLLM, then the check.
# Usage: gpu_check_container.sh WHEEL OWNER   (OWNER uid:gid of the agent: the report is handed back to it, so a
# non-root agent can clean its checkout). Exit: gpu_check.py's own (0 ok, 1 findings, 2 bad input, 3 internal).
set -uo pipefail
wheel=${1:?usage: gpu_check_container.sh WHEEL OWNER}
owner=${2:?usage: gpu_check_container.sh WHEEL OWNER}
python3 -m pip install -q --no-deps --force-reinstall "$wheel" || exit 3
python3 tests/scripts/gpu_check.py --out build/gpu-check
status=$?
chown -R "$owner" build || echo "gpu-check: could not hand build/ back to $owner" >&2
exit "$status"
