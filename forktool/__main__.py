"""Entry point of `python -m forktool`."""

import sys

from forktool.cli import main

sys.exit(main())
