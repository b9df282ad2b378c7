"""`python -m vllm._fork [--json]`: print what this installed fork is made of."""

import json
import sys

from vllm._fork import manifest, summary

if __name__ == "__main__":
    data = manifest()
    print(json.dumps(data, indent=2) if "--json" in sys.argv[1:] else summary(data))
