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
    """For `vllm spec-check` on a host without a GPU: a stand-in platform for --gpu."""
    from vllm._fork.spec_check.platform import maybe_install_for_spec_check

    maybe_install_for_spec_check()


def cmd_init() -> list[CLISubcommand]:
    return [SpecCheckSubcommand()]
