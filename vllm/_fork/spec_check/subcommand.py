"""The `spec-check` subcommand of vLLM's CLI (registered in CMD_MODULES by edits/vllm/entrypoints/cli/main.py.toml)."""

from __future__ import annotations

import argparse
import sys

from vllm.entrypoints.cli.types import CLISubcommand

SUBCOMMAND = "spec-check"


class SpecCheckSubcommand(CLISubcommand):
    """The fork's preflight (vllm/_fork/spec_check): checks a target + speculative config without a GPU."""

    name = SUBCOMMAND

    @staticmethod
    def cmd(args: argparse.Namespace) -> None:
        from vllm._fork.spec_check.cli import execute

        sys.exit(execute(args))

    def subparser_init(self, subparsers: argparse._SubParsersAction):
        from vllm._fork.spec_check.cli import DESCRIPTION, USAGE, add_arguments

        parser = subparsers.add_parser(self.name, usage=USAGE, description=DESCRIPTION,
                                       help="Check from config files whether a speculative setup will start.")
        return add_arguments(parser)


def run_if_requested() -> None:
    """`vllm spec-check …` runs here and exits, before vLLM's CLI imports every other subcommand and builds its
    parser (serve's, bench's, …), none of which the check uses; it parses serve's flags with its own parser."""
    if sys.argv[1:2] != [SUBCOMMAND]:
        return
    from vllm._fork.spec_check.cli import main

    sys.exit(main(sys.argv[2:]))


def cmd_init() -> list[CLISubcommand]:
    return [SpecCheckSubcommand()]
