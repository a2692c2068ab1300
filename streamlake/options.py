"""What every `streamlake <command>` parser shares: no prefix matching, one spelling per option, exit codes said.

- `Parser` is argparse.ArgumentParser with allow_abbrev=False, so `--data` is refused instead of silently meaning
  `--dataset`; its subparsers (add_subparsers uses the parser's own class) are Parsers too.
- `add_renamed(parser, "--environment", "--env", ...)` adds the option under its one spelling and keeps each old
  spelling as a hidden alias that still works but prints a one-line deprecation warning to stderr.
- `exit_codes(...)` is the epilog every top-level help ends with.
"""

from __future__ import annotations

import argparse
import re
import sys

# The one spelling of each option that more than one command takes, and the old spellings still accepted
# (hidden, with a warning). tests/ops/test_cli_consistency.py checks every command against this table.
CANONICAL = {
    "--environment": ("--env",),
    "--dataset": (),
    "--source": (),
    "--lake": (),
    "--dead-letter": (),
    "--checkpoint": (),
    "--config": (),
    "--records": (),
    "--out": (),
}

EXIT_OK = "0 done"
EXIT_FAILED = "1 failed or refused (the message says what to do)"
EXIT_USAGE = "2 usage error: a missing or bad option (see --help)"


def exit_codes(*extra: str, ok: str = EXIT_OK, failed: str = EXIT_FAILED, usage: str = EXIT_USAGE) -> str:
    """The epilog of a top-level help: 'exit codes: 0 ..., 1 ..., 2 ..., <extra>'."""
    return "exit codes: " + "; ".join((ok, failed, usage, *extra))


_UNKNOWN_IN = "_streamlake_unknown_in"  # the namespace's note of which parser met an unknown option


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that never matches an option by its prefix (allow_abbrev=False), nor do its subparsers."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:  # the deepest subcommand's parser returns first: its name is the one whose --help says more
            vars(namespace).setdefault(_UNKNOWN_IN, self.prog)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        prog = vars(namespace).pop(_UNKNOWN_IN, self.prog)
        if extras:
            self.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(extras)} (see `{prog} --help`)\n")
        return namespace

    def error(self, message: str):
        """A usage error: one line saying what is wrong and where to look, exit 2."""
        # A required option with a hidden old spelling is a required group of one visible option (add_renamed).
        message = re.sub(r"^one of the arguments (\S+) is required$", r"the following arguments are required: \1",
                         message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class _Deprecated(argparse.Action):
    """An old spelling of an option: stores like the new one, and says on stderr (one line) to use the new one."""

    def __init__(self, option_strings, dest, new: str, store_true: bool = False, **kwargs):
        self.new = new
        self.store_true = store_true
        super().__init__(option_strings, dest, nargs=0 if store_true else kwargs.pop("nargs", None), **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is deprecated and will be removed; use {self.new}",
              file=sys.stderr)
        setattr(namespace, self.dest, True if self.store_true else values)


def add_renamed(container, new: str, *old: str, required: bool = False, **kwargs) -> argparse.Action:
    """Add option `new` (kwargs as add_argument's) and each `old` spelling as a hidden, warning alias of it.

    A required option and its aliases form a required mutually exclusive group, so either spelling satisfies it (and
    both at once is refused)."""
    dest = kwargs.pop("dest", new.lstrip("-").replace("-", "_"))
    target = container.add_mutually_exclusive_group(required=True) if required and old else container
    action = target.add_argument(new, dest=dest, required=required and not old, **kwargs)
    store_true = kwargs.get("action") == "store_true"
    passed = {key: kwargs[key] for key in ("type", "choices", "nargs", "metavar") if key in kwargs}
    for spelling in old:
        target.add_argument(spelling, dest=dest, action=_Deprecated, new=new, store_true=store_true,
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS, **passed)
    return action


def subcommand(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    """The parser of subcommand `names` (e.g. "job", "stop"), so an error found after parsing names the command run."""
    for name in names:
        choices = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = choices[name]
    return parser


def dataset_files_error(prog: str, error: Exception) -> int:
    """A dataset's files are wrong (glue_jobs.datasets.DatasetError, caught by the command that loads them: this module
    imports no project package): every problem, a hint for a drafted version not pinned yet, exit 1, no traceback."""
    hint = ("\n(a drafted version is pinned by `streamlake dataset check NAME --sample FILE --pin` once it is final)"
            if "has no digest in" in str(error) else "")
    print(f"{prog}: error: {error}{hint}", file=sys.stderr)
    return 1
