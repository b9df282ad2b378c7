"""The spec-check command line: serve's flags plus --gpu, --json and --debug.

Exit 0 will start; 1 will fail or cannot tell; 2 bad input; 3 spec-check itself failed (one line naming the check).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import traceback

from vllm._fork.spec_check.findings import BadInput, OwnFault, bad_input_json, error_json
from vllm._fork.spec_check.gpus import GPUS
from vllm._fork.vocabulary import Exit, Verdict

USAGE = "vllm spec-check MODEL --speculative-config JSON [serve's options] [--gpu h100] [--json]"
DESCRIPTION = ("Loads configs only (no GPU, no weights, no network) and reports, each with a reason and a fix: "
               "architecture, method and draft, EAGLE3 contract, aux layers, hidden sizes, parallelism and memory. "
               "Exit 0: will start; 1: will fail or cannot tell; 2: bad input; 3: spec-check itself failed.")
# humming (a kernel library vLLM 0.33.0 depends on) starts two Python processes in the background when a model
# class imports it, to prebuild its CUDA JIT helpers; spec-check launches no kernel, and on a small host those
# processes (torch imported again, each) compete with it for the CPU and outlive it. A user's own setting is kept.
NO_BACKGROUND_BUILDS = {"HUMMING_DISABLE_PARALLEL_BUILD": "1"}


def add_arguments(parser):
    """MODEL, --gpu, --json and every `vllm serve` engine flag, parsed the same way."""
    from vllm.engine.arg_utils import EngineArgs

    parser.add_argument("model_tag", nargs="?", default=None,
                        help="target: checkpoint folder, config.json, or hub id in the local HF cache")
    parser.add_argument("--gpu", choices=sorted(GPUS), default="h100",
                        help="GPU the deployment will run on (platform classes, memory); default h100")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--debug", action="store_true", help="on an internal error, print its traceback to stderr")
    return EngineArgs.add_cli_args(parser)


def _logs_to_stderr() -> None:
    """Point every logging handler that writes to stdout (vLLM's own among them) at stderr."""
    loggers = [logging.getLogger()] + [logging.getLogger(name) for name in logging.root.manager.loggerDict]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
                handler.setStream(sys.stderr)


def readable(message: str) -> str:
    """One line, with the parser's type functions named for what they parse (not `<function loads at 0x…>`)."""
    message = re.sub(r"<function loads at 0x[0-9a-f]+>", "a JSON object", message)
    message = re.sub(r"<(?:function|class) '?([\w.]+)'?(?: at 0x[0-9a-f]+)?>", r"\1", message)
    return " ".join(message.split())  # one line, whatever the offending value held


def _print_bad_input(message: str, as_json: bool) -> int:
    message = readable(message)
    print(bad_input_json(message) if as_json else f"spec-check: bad input: {message}")
    return int(Exit.BAD_INPUT)


def _print_own_fault(fault: OwnFault, as_json: bool, debug: bool) -> int:
    """One line naming the check that failed; the traceback only with --debug; never findings or advice."""
    if debug:
        traceback.print_exception(fault.cause, file=sys.stderr)
    detail = str(fault).removeprefix(f"{fault.check}: ")
    message = readable(f"{detail} (a spec-check bug or a vLLM interface it relies on changed; --debug shows "
                       "the traceback)")
    print(error_json(Verdict.INTERNAL_ERROR, message, fault.check) if as_json
          else f"spec-check: internal error in check '{fault.check}': {message}")
    return int(Exit.INTERNAL)


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
    except OwnFault as fault:
        return _print_own_fault(fault, args.json, getattr(args, "debug", False))
    print(text)
    return code


def reject(message: str):
    """argparse's error(): an unknown flag, a value that does not parse, a --gpu not in the list."""
    raise BadInput(message)


def build_parser():
    """The standalone parser; argparse's own errors become BadInput (exit 2 with a message, no usage dump)."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = add_arguments(FlexibleArgumentParser(prog="vllm spec-check", usage=USAGE, description=DESCRIPTION))
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
    """`vllm spec-check ARGS` and `python -m vllm._fork.spec_check ARGS` (the CLI edit calls this first)."""
    from vllm._fork.spec_check.platform import install_if_unspecified, requested_gpu

    argv = sys.argv[1:] if argv is None else argv
    for name, value in NO_BACKGROUND_BUILDS.items():
        os.environ.setdefault(name, value)
    install_if_unspecified(requested_gpu(argv))
    return run(build_parser(), argv)
