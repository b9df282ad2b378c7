"""`vllm spec-check`: will this target + speculative config start? Answered from config files only."""
