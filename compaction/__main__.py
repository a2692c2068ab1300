"""Local CLI: compact a lake directory with a local Spark session.

    streamlake compact-local --lake DIR [--hour YYYY-MM-DDTHH] [--target-file-mb N]
                             [--grace-minutes N] [--lookback-hours N] [--environment ENV]

(`python -m compaction run-local ...` is the same.)

Defaults for the numbers come from the `compaction` block of config/environments.json for --environment
(default dev), read without infra (compaction/environments.py) and checked like the options. Exit codes:
0 done, 1 a partition failed (its journal lets the next run recover), 2 bad arguments or defaults.
COMPACTION_CRASH_AT=<phase>[:n] makes the process SIGKILL itself at that phase (kill tests).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from compaction import layout
from compaction.environments import read_environment
from glue_jobs import datasets
from glue_jobs.datasets import dataset_name
from streamlake.options import Parser, dataset_files_error, exit_codes, subcommand

if TYPE_CHECKING:
    from compaction.faults import FaultInjector
    from compaction.job import CompactionSettings

MB = 1024 * 1024
CONFIG_PATH = Path(__file__).resolve().parents[1] / "config" / "environments.json"


def _positive_mb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of megabytes") from None
    if not value > 0 or value > 1024 * 1024:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 (and at most 1048576)")
    return value


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    return parse


def _hour(text: str):
    try:
        return layout.parse_hour(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


EPILOG = exit_codes(failed="1 a partition failed (its journal lets the next run recover) or an Iceberg check failed",
                    usage="2 usage error: a missing or bad option, a bad config default, a lake that is not there")


def build_parser(prog: str = "python -m compaction", run_local_prog: str | None = None) -> argparse.ArgumentParser:
    """The parser; `prog` names the top level, `run_local_prog` its run-local command (default `<prog> run-local`;
    `streamlake compact-local` when run as that)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0], epilog=EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command", help="run-local: the one command")
    run = commands.add_parser("run-local", help="compact the hour partitions of a local lake directory", epilog=EPILOG,
                              description="Compact the hour partitions of a local lake directory (local Spark).",
                              **({"prog": run_local_prog} if run_local_prog else {}))
    run.add_argument("--lake", required=True, help="lake root holding event_date=YYYY-MM-DD/event_hour=H/")
    run.add_argument("--dataset", type=dataset_name,
                     help="the dataset whose lake table this is (datasets/<name>/): its columns and key (required where "
                          "there are several datasets)")
    run.add_argument("--hour", type=_hour, help="compact only this UTC hour, e.g. 2026-01-01T05 (ignores the lookback)")
    run.add_argument("--target-file-mb", type=_positive_mb, help="target output file size in MB (fractions allowed)")
    run.add_argument("--grace-minutes", type=_int_at_least(0), help="an hour is closed this long after it ends")
    run.add_argument("--quiet", action="store_true",
                     help="print only the run's totals: no start line (stderr), no line per partition")
    run.add_argument("--scan", action="store_true",
                     help="look at every hour of the lookback window instead of the partitions log the streaming "
                          "job writes (for files written by anything else)")
    run.add_argument("--lookback-hours", type=_int_at_least(1), help="with --scan: how many hours back to look")
    run.add_argument("--environment", default="dev",
                     help="config environment for the defaults and metrics (default dev)")
    run.add_argument("--snapshot-retention-hours", type=_int_at_least(1),
                     help="an Iceberg dataset (table_format iceberg): snapshots kept this long (config "
                          "compaction.iceberg_snapshot_retention_hours); its table is maintained instead of compacted")
    return parser


def _config_defaults(environment: str, path: Path) -> dict:
    """target_file_mb, grace_minutes and lookback_hours of the environment's compaction block, each checked
    by the parser of its option; ValueError naming the file and the field."""
    compaction = read_environment(path, environment).get("compaction")
    if not isinstance(compaction, dict):
        raise ValueError(f"{path}: {environment}.compaction: {compaction!r} must be an object")
    parsers = {"target_file_mb": _positive_mb, "grace_minutes": _int_at_least(0), "lookback_hours": _int_at_least(1),
               "iceberg_snapshot_retention_hours": _int_at_least(1)}
    defaults = {}
    for key, parse in parsers.items():
        where = f"{path}: {environment}.compaction.{key}"
        if key not in compaction:
            raise ValueError(f"{where}: missing (required)")
        value = compaction[key]
        # bool is an int subclass; a JSON string is not a number even if it reads as one.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: {value!r} must be a number")
        try:
            defaults[key] = parse(str(value))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return defaults


def _local_spark():
    from glue_jobs.session import local_session

    return local_session("compaction-local", master=os.environ.get("COMPACTION_SPARK_MASTER", "local[2]"))


def _mb(n: int) -> str:
    return f"{n / MB:.2f} MB"


def print_summary(summary, out=None, *, partitions: bool = True) -> None:
    """The run's lines: one per partition (unless printed as they ended, or --quiet), then the totals."""
    out = out or sys.stdout  # looked up when called: a caller (a test) may have replaced it since import
    if partitions:
        print(f"run {summary.run_id}", file=out)
        for r in summary.results:
            print_result(r, out)
    compacted = summary.of("compacted")
    print(
        f"{len(compacted)} partition(s) compacted, {len(summary.of('rolled_forward', 'rolled_back'))} recovered, "
        f"{len(summary.of('skipped'))} skipped, {len(summary.of('failed'))} failed in {summary.seconds:.2f} s; "
        f"{summary.total('differing_duplicates', compacted)} dropped duplicate(s) differed from the copy kept",
        file=out,
    )


def print_result(r, out=None) -> None:
    """One partition's line."""
    out = out or sys.stdout
    if r.action in ("compacted", "rolled_forward"):
        print(
            f"  {r.partition}  {r.action}: files {r.files_before} -> {r.files_after}, "
            f"{_mb(r.bytes_before)} -> {_mb(r.bytes_after)}, rows {r.rows_in} -> {r.rows_out}, "
            f"duplicates removed {r.duplicates}"
            f"{f' ({r.differing_duplicates} differing from the copy kept)' if r.differing_duplicates else ''}"
            f"{', re-staged' if r.restaged else ''}"
            f"{f', {r.inputs_left} changed input(s) left for next run' if r.inputs_left else ''}, {r.seconds:.2f} s",
            file=out, flush=True,
        )
    elif r.action == "rolled_back":
        print(f"  {r.partition}  rolled back run {r.run_id}: {r.reason}", file=out, flush=True)
    elif r.action == "failed":
        print(f"  {r.partition}  FAILED: {r.error}", file=out, flush=True)
    else:
        print(f"  {r.partition}  skipped ({r.reason}, {r.files_before} file(s))", file=out, flush=True)


def _settings(args: argparse.Namespace) -> tuple[CompactionSettings, FaultInjector]:
    """The run's settings and fault injector; ValueError with the message for the operator when one is bad."""
    lake = Path(args.lake)
    if lake.exists() and not lake.is_dir():
        raise ValueError(f"--lake {args.lake} is a file; it must be the lake's folder")
    if not lake.is_dir():
        raise ValueError(f"--lake {args.lake}: no such directory")
    from compaction.faults import FaultInjector

    faults = FaultInjector()
    defaults = _config_defaults(args.environment, CONFIG_PATH)
    from compaction.job import CompactionSettings, check_hour_closed

    target_mb = args.target_file_mb if args.target_file_mb is not None else defaults["target_file_mb"]
    settings = CompactionSettings(
        lake_path=str(lake.resolve()),
        dataset=args.dataset,
        target_file_bytes=max(1024, int(target_mb * MB)),
        grace_minutes=args.grace_minutes if args.grace_minutes is not None else defaults["grace_minutes"],
        lookback_hours=args.lookback_hours if args.lookback_hours is not None else defaults["lookback_hours"],
        hour=args.hour,
        scan=args.scan,
        environment=args.environment,
    )
    try:
        check_hour_closed(settings, datetime.now(timezone.utc))
    except ValueError as exc:
        raise ValueError(f"--hour: {exc}") from None
    return settings, faults


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`prog`: what the run-local command is called (`streamlake compact-local`); default `python -m compaction`."""
    parser = build_parser(prog or "python -m compaction", run_local_prog=prog)
    args = parser.parse_args(argv)
    parser = subcommand(parser, args.command)  # its errors name the command run (`streamlake compact-local`)
    try:
        return _run(parser, args, prog)
    except datasets.DatasetError as error:  # a dataset's files are wrong: every problem, no traceback
        return dataset_files_error(parser.prog, error)


def _run(parser, args, prog: str | None) -> int:
    try:
        args.dataset = datasets.chosen(args.dataset)
    except datasets.DatasetError as error:
        parser.error("; ".join(error.problems))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("compaction").setLevel(logging.INFO)
    logging.getLogger("glue_jobs.lake.storage").setLevel(logging.INFO)  # once a run: how it deletes (delete_files)
    from glue_jobs.local_runner import local_iceberg_target

    iceberg = local_iceberg_target(args.dataset)
    if iceberg is not None:
        return _maintain_local(args, iceberg)
    if args.snapshot_retention_hours is not None:
        print("error: --snapshot-retention-hours is for an Iceberg dataset; "
              f"{args.dataset} is Parquet (its dataset.json table_format)", file=sys.stderr)
        return 2
    try:
        settings, faults = _settings(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from compaction.job import Compactor
    from compaction.metrics import LogMetricSink
    from glue_jobs.commit.ownership import OwnershipError

    if not args.quiet:  # Spark takes seconds to start: say what is starting before it does (stderr: not the results)
        print(f"{prog or 'python -m compaction run-local'}: starting a local Spark session to compact {args.dataset}'s "
              f"closed hours under {args.lake}; a line per partition follows", file=sys.stderr, flush=True)
    spark = _local_spark()
    try:
        compactor = Compactor(spark, settings, sink=LogMetricSink(args.environment), faults=faults,
                              on_result=None if args.quiet else print_result)
    except OwnershipError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = compactor.run()
    print_summary(summary, partitions=False)
    return 0 if summary.succeeded else 1


def _maintain_local(args: argparse.Namespace, iceberg) -> int:
    """An Iceberg dataset's local table (the local runner's catalog under --lake): Iceberg's maintenance instead of
    compaction (compaction/iceberg_maintenance.py). Hour, scan, grace and lookback options do not apply."""
    given = [f"--{name.replace('_', '-')}" for name in ("hour", "grace_minutes", "lookback_hours") if getattr(args, name) is not None]
    if args.scan:
        given.append("--scan")
    if given:
        print(f"error: {', '.join(given)}: not for an Iceberg dataset ({args.dataset}), whose table is maintained whole",
              file=sys.stderr)
        return 2
    if not (Path(args.lake) / "catalog.sqlite").is_file():
        print(f"error: --lake {args.lake}: no local Iceberg catalog (catalog.sqlite) there; run the local runner first",
              file=sys.stderr)
        return 2
    try:
        defaults = _config_defaults(args.environment, CONFIG_PATH)
        from compaction.faults import armed_bug, iceberg_commit
        from compaction.iceberg_maintenance import MaintenanceSettings, maintain

        settings = MaintenanceSettings(
            target_file_mb=max(1, round(args.target_file_mb if args.target_file_mb is not None else defaults["target_file_mb"])),
            snapshot_retention_hours=args.snapshot_retention_hours or defaults["iceberg_snapshot_retention_hours"])
        bug = armed_bug()  # COMPACTION_BUG (the check tests): a faulty commit right after the rewrite
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from compaction.verify import CheckFailed
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.session import local_session

    spark = local_session("compaction-local", master=os.environ.get("COMPACTION_SPARK_MASTER", "local[2]"),
                          iceberg_warehouse=args.lake)
    table = LakeTable.of(args.dataset)
    hook = None if bug is None else lambda session: iceberg_commit(bug, session, iceberg, table)
    try:
        result = maintain(spark, iceberg, settings, lake_table=table, after_rewrite=hook)
    except CheckFailed as failed:
        print(f"FAILED: {failed}")
        return 1
    print(f"maintained {result.render()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
