"""The spec-check command line: serve's flags plus --gpu and --json; exit 0 will start, 1 will fail, 2 bad input."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

from vllm._fork.spec_check.findings import EXIT_BAD_INPUT, BadInput, bad_input_json
from vllm._fork.spec_check.gpus import GPUS

USAGE = "vllm spec-check MODEL --speculative-config JSON [serve's options] [--gpu h100] [--json]"
DESCRIPTION = ("Loads configs only (no GPU, no weights, no network) and reports, each with a reason and a fix: "
               "architecture, method and draft, EAGLE3 contract, aux layers, hidden sizes and parallelism. "
               "Exit 0: will start; 1: will fail; 2: bad input.")


def add_arguments(parser):
    """MODEL, --gpu, --json and every `vllm serve` engine flag, parsed the same way."""
    from vllm.engine.arg_utils import EngineArgs

    parser.add_argument("model_tag", nargs="?", default=None,
                        help="target: checkpoint folder, config.json, or hub id in the local HF cache")
    parser.add_argument("--gpu", choices=sorted(GPUS), default="h100",
                        help="GPU the deployment will run on (platform classes, memory); default h100")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return EngineArgs.add_cli_args(parser)


def _logs_to_stderr() -> None:
    """Point every logging handler that writes to stdout (vLLM's own among them) at stderr."""
    loggers = [logging.getLogger()] + [logging.getLogger(name) for name in logging.root.manager.loggerDict]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
                handler.setStream(sys.stderr)


def _print_bad_input(message: str, as_json: bool) -> int:
    message = " ".join(message.split())  # one line, whatever the offending value held
    print(bad_input_json(message) if as_json else f"spec-check: bad input: {message}")
    return EXIT_BAD_INPUT


def execute(args: argparse.Namespace) -> int:
    """Print the report (or the bad-input message) on stdout and return the exit code."""
    from vllm._fork.spec_check.run import report

    args.model = args.model_tag or args.model
    _logs_to_stderr()  # stdout carries the report alone: --json output is parsed by CI
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if not args.model:
                raise BadInput("MODEL: required (a checkpoint folder, its config.json, or a cached hub id)")
            code, text = report(args)
    except BadInput as exc:
        return _print_bad_input(str(exc), args.json)
    print(text)
    return code


def build_parser():
    """The standalone parser; argparse's own errors become BadInput (exit 2 with a message, no usage dump)."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = add_arguments(FlexibleArgumentParser(prog="vllm spec-check", usage=USAGE, description=DESCRIPTION))

    def reject(message: str):  # unknown flag, a value that does not parse, a --gpu not in the list
        raise BadInput(message)

    parser.error = reject
    return parser


def run(parser, argv: list[str]) -> int:
    """Parse `argv` with `parser` and execute; what a user typed wrong exits 2."""
    try:
        args = parser.parse_args(argv)
    except BadInput as exc:
        return _print_bad_input(str(exc), "--json" in argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    return execute(args)


def main(argv: list[str] | None = None) -> int:
    """`python -m vllm._fork.spec_check ARGS`: the same command without the rest of vLLM's CLI."""
    from vllm._fork.spec_check.platform import install_if_unspecified, requested_gpu

    argv = sys.argv[1:] if argv is None else argv
    install_if_unspecified(requested_gpu(argv))
    return run(build_parser(), argv)
