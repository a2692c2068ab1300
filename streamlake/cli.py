"""`streamlake <command> ...`: every command an operator or a developer runs, in one place.

Each command is the project's own tool, run with the rest of the command line (its `--help` says more):

    streamlake dataset new NAME --sample FILE.jsonl      draft a dataset's files from sample records
    streamlake run-local --dataset orders --input in/ --lake lake/ --dead-letter dl/ --checkpoint cp/ --once
    streamlake job status --env prod --source clickstream

`python -m glue_jobs`, `python -m compaction`, `python -m operations` and the `python -m devtools.*` modules keep
working; this is the same code under one name. Installed as a console script by `make bootstrap` (pyproject.toml
[project.scripts]); `python -m streamlake` is the same without the install.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    module: str  # whose main(argv) runs it
    prefix: tuple[str, ...]  # argv given before the user's arguments
    help: str
    who: str  # operator | developer | reviewer


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


def usage() -> str:
    lines = ["usage: streamlake <command> [arguments]   (streamlake <command> --help for its own options)", ""]
    for who, title in GROUPS:
        lines.append(f"{title}:")
        lines += [f"  {name:<14} {command.help}" for name, command in COMMANDS.items() if command.who == who]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    command = COMMANDS.get(name)
    if command is None:
        print(f"streamlake: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(command.module)
    try:
        result = module.main([*command.prefix, *rest])
    except SystemExit as exit_:  # argparse's --help and usage errors
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
