"""`python -m vllm._fork.spec_check MODEL --speculative-config JSON …` (same as `vllm spec-check`)."""

import sys

from vllm._fork.spec_check.cli import main

sys.exit(main())
