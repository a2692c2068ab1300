"""`streamlake <command> ...`: every command an operator or a developer runs, in one place.

Each command is the project's own tool, run with the rest of the command line (its `--help` says more):

    streamlake dataset new NAME --sample FILE.jsonl      draft a dataset's files from sample records
    streamlake run-local --dataset orders --input in/ --lake lake/ --dead-letter dl/ --checkpoint cp/ --once
    streamlake job status --environment prod --source clickstream

Every command spells an option the same way (streamlake/options.py: --environment, --dataset, ...; an old spelling
such as --env still works and warns), refuses an abbreviated option, and reports its usage as `streamlake <command>`.
`python -m glue_jobs`, `python -m compaction`, `python -m operations` and the `python -m devtools.*` modules keep
working; this is the same code under one name. Installed as a console script by `make bootstrap` (pyproject.toml
[project.scripts]); `python -m streamlake` is the same without the install.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    module: str  # whose main(argv) runs it
    prefix: tuple[str, ...]  # argv given before the user's arguments
    help: str
    who: str  # operator | developer | reviewer

    def prog(self, name: str) -> str:
        """What the module's main(argv, prog=...) is given: the program name of its top-level parser when the
        prefix is a subcommand of the same name (its subparser then shows `streamlake <name>`), else
        `streamlake <name>` (a module without subcommands; compaction's run-local, reached as compact-local)."""
        return "streamlake" if self.prefix[:1] == (name,) else f"streamlake {name}"


COMMANDS = {
    # local development, no AWS account
    "dataset": Command("operations.cli", ("dataset",), "draft a dataset's files from sample records (new), or run its contract over a sample (check)", "developer"),
    "generate": Command("glue_jobs.__main__", ("generate",), "write realistic valid and bad records for a dataset", "developer"),
    "run-local": Command("glue_jobs.__main__", ("run-local",), "stream a directory of JSON files into a local lake through the job's code", "developer"),
    "run-kafka": Command("glue_jobs.__main__", ("run-kafka",), "the Kafka job's path: a topic of Schema Registry frames into a local lake", "developer"),
    "compact-local": Command("compaction.__main__", ("run-local",), "compact the hour partitions of a local lake", "developer"),
    "rehearse": Command("rehearsal.__main__", (), "run the synthesized jobs (script, zip, arguments) through AWS's awsglue library", "developer"),
    # operating an environment (its stack's outputs name every resource)
    "produce": Command("operations.cli", ("produce",), "send records (or replay dead letters) to an environment's stream or topic", "operator"),
    "job": Command("operations.cli", ("job",), "start, stop (and hold), status, reset-checkpoint of one source's streaming job", "operator"),
    "compact": Command("operations.cli", ("compact",), "start the compaction job for one hour, or for its lookback window", "operator"),
    "schema-evolve": Command("operations.cli", ("schema-evolve",), "check and roll out a dataset's new schema version", "operator"),
    "outputs": Command("operations.cli", ("outputs",), "which stack outputs the tools read, and which are missing", "operator"),
    # planning and review
    "sizing": Command("devtools.sizing", (), "shards, partitions, workers, window and monthly cost for a stated load", "reviewer"),
    "diff": Command("devtools.diff", (), "the infrastructure diff of the working tree against a git ref, priced", "reviewer"),
}
GROUPS = (("developer", "Local development (no AWS account)"), ("operator", "Operating an environment"),
          ("reviewer", "Planning and review"))


EXIT_CODES = """Exit codes (every command): 0 done; 1 failed or refused (the one-line message says what to do); 2 usage error
(a missing, unknown or bad option: see `streamlake <command> --help`); 130 interrupted. Some commands add their own,
named in their --help: 3 (dataset check: records above --max-failure-rate; diff: a change would fail to deploy),
4 (diff: a change loses data without --allow-data-loss)."""


def usage() -> str:
    lines = ["usage: streamlake [--version] <command> [arguments]   (streamlake <command> --help for its own options)", ""]
    for who, title in GROUPS:
        lines.append(f"{title}:")
        lines += [f"  {name:<14} {command.help}" for name, command in COMMANDS.items() if command.who == who]
        lines.append("")
    lines += [EXIT_CODES, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "--version":
        from streamlake import version

        print(f"streamlake {version()}")
        return 0
    name, rest = args[0], args[1:]
    command = COMMANDS.get(name)
    if command is None:
        print(f"streamlake: error: unknown command {name!r}: run `streamlake --help` for the list", file=sys.stderr)
        return 2
    module = importlib.import_module(command.module)
    given = {"prog": command.prog(name)} if "prog" in inspect.signature(module.main).parameters else {}
    try:
        result = module.main([*command.prefix, *rest], **given)
    except SystemExit as exit_:  # argparse's --help and usage errors
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        print(f"streamlake {name}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
