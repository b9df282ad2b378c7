#!/usr/bin/env bash
# Smoke test of the fork's serving image (GPU agent): tiny Glm4 + EAGLE3 checkpoints written locally, served by the
# image's OpenAI server with a speculative config, one completion request. Usage: gpu_docker_smoke.sh IMAGE
# Exit 0 when the server answered; 1 when it did not start or answer (its log tail is printed); 2 bad usage.
# The checkpoints are written as the agent's own user (a non-root agent can remove them); cleanup never changes
# the exit status.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: gpu_docker_smoke.sh IMAGE" >&2
  exit 2
fi
image=$1
here=$(cd "$(dirname "$0")" && pwd)
models=$(mktemp -d)
name="fork-smoke-$$"
port=${SMOKE_PORT:-18000}
cleanup() {
  local status=$?
  docker rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$models" 2>/dev/null || echo "smoke: could not remove $models (left behind)" >&2
  exit "$status"
}
trap cleanup EXIT
# Written inside the image (it has torch and transformers), as the CPU tests write them, owned by this user.
docker run --rm --user "$(id -u):$(id -g)" -e HOME=/tmp -v "$here:/scripts:ro" -v "$models:/models" \
  --entrypoint python3 "$image" \
  -c "import sys; sys.path.insert(0, '/scripts'); import tiny_models as t; from pathlib import Path; t.glm4(Path('/models/glm4')); t.eagle3(Path('/models/eagle3'))"
docker run -d --name "$name" --gpus all --ipc=host -p "127.0.0.1:$port:8000" -v "$models:/models:ro" "$image" \
  --model /models/glm4 --max-model-len 1024 \
  --speculative-config '{"method": "eagle3", "model": "/models/eagle3", "num_speculative_tokens": 3}' >/dev/null
for _ in $(seq 1 180); do
  if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
  if [ "$(docker inspect -f '{{.State.Running}}' "$name")" != "true" ]; then break; fi
  sleep 2
done
if ! answer=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "/models/glm4", "prompt": "w10 w11 w12", "max_tokens": 16, "temperature": 0}'); then
  echo "smoke: the server did not answer; its log:"
  docker logs --tail 60 "$name" || true
  exit 1
fi
echo "$answer" | python3 -c "import json, sys; r = json.load(sys.stdin); assert r['choices'][0]['text'] is not None; print('smoke: ok:', r['usage'])"
docker logs "$name" 2>&1 | grep -E "SpecDecoding metrics|speculative" | tail -3 || true
