"""The errors forktool turns into one-line messages and exit codes (see vllm/_fork/vocabulary.py's Exit)."""

from forktool.vocabulary import Exit


class ForkError(Exception):
    """Bad input (exit 2): one line naming the malformed spec, flag, pin or table, or the missing artifact."""

    exit_code = Exit.BAD_INPUT


class FindingsError(ForkError):
    """The answer is "no" (exit 1): a broken edit, a shadowed overlay file or a broken internal on this base."""

    exit_code = Exit.FINDINGS
