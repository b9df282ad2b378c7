"""The `spec-check` subcommand of vLLM's CLI (registered in CMD_MODULES by edits/vllm/entrypoints/cli/main.py.toml)."""

from __future__ import annotations

import argparse
import sys

from vllm.entrypoints.cli.types import CLISubcommand


class SpecCheckSubcommand(CLISubcommand):
    """The fork's preflight (vllm/_fork/spec_check): checks a target + speculative config without a GPU."""

    name = "spec-check"

    @staticmethod
    def cmd(args: argparse.Namespace) -> None:
        from vllm._fork.spec_check.cli import execute

        sys.exit(execute(args))

    def subparser_init(self, subparsers: argparse._SubParsersAction):
        from vllm._fork.spec_check.cli import DESCRIPTION, USAGE, add_arguments

        parser = subparsers.add_parser(self.name, usage=USAGE, description=DESCRIPTION,
                                       help="Check from config files whether a speculative setup will start.")
        return add_arguments(parser)


def maybe_install_platform() -> None:
    """For `vllm spec-check`: a stand-in platform for --gpu on a host without a GPU, and its bad-input handling."""
    from vllm._fork.spec_check.platform import SUBCOMMAND, maybe_install_for_spec_check

    maybe_install_for_spec_check()
    if sys.argv[1:2] == [SUBCOMMAND]:
        _route_parser_errors()


def _route_parser_errors() -> None:
    """vLLM's CLI parses spec-check's flags with its own parsers; in this process their errors exit 2 the way
    spec-check reports bad input (one line, JSON under --json), not with a usage dump."""
    from vllm._fork.spec_check.cli import exit_bad_input
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    FlexibleArgumentParser.error = lambda self, message: exit_bad_input(message, sys.argv)


def cmd_init() -> list[CLISubcommand]:
    return [SpecCheckSubcommand()]
