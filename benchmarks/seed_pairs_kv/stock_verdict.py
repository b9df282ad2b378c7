"""What stock vLLM builds for one `vllm serve` command line: `stock_verdict.py LIBCUDA GPU SCENARIO.json`.

kv_pairs.py runs it with the pinned release's own Python files first on PYTHONPATH (no fork file is importable
then), on the same stand-in SM90 platform as the plans. Prints one line: `accepted`, or `refused: <the error>`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "glm5_kv"))

import sm90_stub  # noqa: E402  (no vllm import may precede sm90_stub.install)


def main() -> None:
    libcuda, gpu, scenario_file = sys.argv[1:4]
    sm90_stub.install(gpu, Path(libcuda))
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    import vllm

    assert not (Path(vllm.__file__).parent / "_fork").exists(), "stock_verdict.py must run on stock vLLM files"
    scenario = json.loads(Path(scenario_file).read_text())
    try:
        EngineArgs(model=scenario["model"], skip_tokenizer_init=True, load_format="dummy", tensor_parallel_size=8,
                   speculative_config=scenario["spec"], kv_cache_dtype=scenario["kv"],
                   **scenario["flags"]).create_engine_config(UsageContext.OPENAI_API_SERVER)
    except ValueError as exc:  # vLLM's own validation (pydantic's ValidationError is a ValueError)
        # pydantic's wrapping (the count, "Value error, ", the input echo) is left out: vLLM's own words remain.
        words = " ".join(str(exc).split())
        print("refused: " + re.sub(r"^\d+ validation errors? for \w+ Value error, | \[type=.*$", "", words))
        return
    print("accepted")


if __name__ == "__main__":
    main()
