"""streamlake run-local | run-kafka | generate (see docs/streaming-job.md, docs/kafka.md); `python -m glue_jobs` is the same."""

from __future__ import annotations

import argparse
import sys

from glue_jobs.datasets import dataset_name
from streamlake.options import Parser, dataset_files_error, exit_codes, subcommand


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _partition_list(text: str) -> list[int]:
    try:
        partitions = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of partition numbers") from None
    if any(p < 0 for p in partitions) or len(set(partitions)) != len(partitions):
        raise argparse.ArgumentTypeError(f"{text!r}: partitions must be distinct numbers >= 0")
    return partitions


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{value} must be between 0 and 1")
    return value


EPILOG = exit_codes(ok="0 done (generate: the files are written; run-local --once: every file present is processed)",
                    failed="1 failed: a Spark or job error (its message and the log say which)",
                    usage="2 usage error: a missing or bad option, an input that is not there, a lake another dataset "
                          "owns (the one-line message says which)")


def build_parser(prog: str = "python -m glue_jobs") -> argparse.ArgumentParser:
    """The streaming job tools' parser; `prog` is the program name (`streamlake` when run as streamlake <command>)."""
    parser = Parser(prog=prog, description="Streaming job tools, run locally.", epilog=EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command", help="what to run")

    run = commands.add_parser("run-local", help="stream a directory of NDJSON files into a local lake", epilog=EPILOG,
                              description="Stream a directory of newline-delimited JSON files into a local lake "
                                          "through the streaming job's own code (local Spark).")
    run.add_argument("--input", required=True, help="directory of newline-delimited JSON files (watched)")
    run.add_argument("--lake", required=True, help="lake root (Parquet, event_date=/event_hour= partitions)")
    run.add_argument("--dead-letter", required=True, help="dead-letter root (Parquet, ingest_date= partitions)")
    run.add_argument("--checkpoint", required=True, help="checkpoint directory; reuse it to resume")
    run.add_argument("--once", action="store_true", help="process the files present now, then exit")
    run.add_argument("--max-files-per-batch", type=_positive_int, default=None,
                     help="at most this many files per micro-batch (default: all new files)")
    run.add_argument("--source-name", default="local", help="source name recorded on every row (default: local)")
    run.add_argument("--dataset", type=dataset_name,
                     help="the dataset the records are (datasets/<name>/): its contract and lake table (required where "
                          "there are several datasets)")
    run.add_argument("--route-field", default=None,
                     help="the records are several datasets: this field (a path such as type or meta.type) says which; "
                          "with --route, instead of --dataset")
    run.add_argument("--route", type=_route, action="append", default=None, metavar="VALUE=DATASET",
                     help="records whose --route-field is VALUE go to DATASET, into <lake>/DATASET and <dead-letter>/DATASET; "
                          "repeat per value. Records no route takes are dead letters in <dead-letter>/unroutable")
    run.add_argument("--quiet", action="store_true",
                     help="print only the run's summary: no start line (stderr), no line per micro-batch")
    run.add_argument("--trigger-seconds", type=_positive_int, default=5,
                     help="micro-batch interval in seconds without --once (default 5)")

    kafka = commands.add_parser("run-kafka", help="the Kafka job's path: a topic of Schema Registry frames into a local lake",
                                epilog=EPILOG,
                                description="Read a Kafka topic of Glue Schema Registry frames into a local lake through "
                                            "the Kafka job's own code (local Spark, a broker without auth).")
    kafka.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port] of a broker without auth (local)")
    kafka.add_argument("--topic", required=True, help="the Kafka topic to read")
    kafka.add_argument("--partitions", type=_partition_list, default=None,
                       help="only these partitions (comma-separated; Spark's `assign`), e.g. 0,1,2")
    kafka.add_argument("--registry-name", required=True, help="Glue Schema Registry registry (AWS_ENDPOINT_URL for a local one)")
    kafka.add_argument("--schema-name", default=None, help="the dataset's schema in that registry (with --dataset)")
    kafka.add_argument("--dataset", type=dataset_name, default=None,
                       help="the dataset the topic carries (with --schema-name; a topic of several: --route-schema)")
    kafka.add_argument("--route-schema", type=_schema_route, action="append", default=None, metavar="SCHEMA=DATASET",
                       help="the topic carries several datasets: frames of a version of registry schema SCHEMA go to "
                            "DATASET, into <lake>/DATASET and <dead-letter>/DATASET; repeat per dataset, instead of "
                            "--schema-name and --dataset. Frames of any other schema are dead letters in "
                            "<dead-letter>/unroutable")
    kafka.add_argument("--lake", required=True, help="lake root to write the dataset's table under")
    kafka.add_argument("--dead-letter", required=True, help="dead-letter root (Parquet, ingest_date= partitions)")
    kafka.add_argument("--checkpoint", required=True, help="checkpoint directory; reuse it to resume")
    kafka.add_argument("--source-name", default="kafka", help="source name recorded on every row (default: kafka)")
    kafka.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest",
                       help="where a new checkpoint starts in the topic (default earliest)")
    kafka.add_argument("--max-offsets-per-trigger", type=_positive_int, default=None,
                       help="at most this many records per micro-batch (default: no limit)")
    kafka.add_argument("--once", action="store_true", help="process what the topic holds now, then exit")
    kafka.add_argument("--quiet", action="store_true",
                       help="print only the run's summary: no start line (stderr), no line per micro-batch")
    kafka.add_argument("--trigger-seconds", type=_positive_int, default=5,
                       help="micro-batch interval in seconds without --once (default 5)")

    gen = commands.add_parser(
        "generate", help="write realistic valid and bad NDJSON records for a dataset", epilog=EPILOG,
        description="Write --records newline-delimited JSON records, spread over --files files, into --out: "
                    "events-NNNNN.json for clickstream (its own generator: sessions and every kind of bad record), "
                    "<dataset>-NNNNN.json for any other dataset (records made from its schema and rules). Event times "
                    "fall in the 48 hours before now. Prints how many are valid, bad (per reason) and duplicates.")
    gen.add_argument("--out", required=True,
                     help="directory to write into (created): events-00000.json ... for clickstream, "
                          "<dataset>-00000.json ... for other datasets")
    gen.add_argument("--records", type=_positive_int, required=True, help="how many records in all, over every file")
    gen.add_argument("--files", type=_positive_int, default=10, help="how many files to spread them over (default 10)")
    gen.add_argument("--bad-ratio", type=_ratio, default=0.01,
                     help="share of records (0..1) made bad on purpose, each to fail the contract with a known "
                          "reason code (default 0.01)")
    gen.add_argument("--duplicate-ratio", type=_ratio, default=0.005,
                     help="share of records (0..1) that repeat an earlier valid record, for the job to collapse "
                          "(default 0.005)")
    gen.add_argument("--seed", type=int, default=7,
                     help="random seed: the same seed makes the same records, times relative to now (default 7)")
    gen.add_argument("--expect", default=None,
                     help="also write to this JSON file what the job must make of the records: the valid records' "
                          "keys, the bad ones per reason, the duplicate count")
    gen.add_argument("--shape", choices=("generated", "producers"), default="generated",
                     help="clickstream only: `producers` adds what real producers send (JSON escapes and UTF-8 text, "
                          "case variants, json_text arrays, integers for a double, explicit nulls; docs/development.md "
                          "\"Benchmarks and sizing\"); default generated")
    gen.add_argument("--dataset", type=dataset_name,
                     help="whose records (datasets/<name>/; required where there are several datasets); clickstream has "
                          "its own realistic generator")
    gen.add_argument("--route-field", default=None,
                     help="a routed stream's mix instead of one dataset: each record carries this field (a path such as "
                          "type or meta.type) with its --route value, and about 2%% no route takes; with --route")
    gen.add_argument("--route", type=_route, action="append", default=None, metavar="VALUE=DATASET",
                     help="with --route-field: records of DATASET carry VALUE; repeat per dataset, in about equal shares")
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog or "python -m glue_jobs")
    args = parser.parse_args(argv)
    parser = subcommand(parser, args.command)  # its errors name the command run, e.g. `streamlake run-local`
    from glue_jobs.datasets import DatasetError

    try:
        return _run(parser, args)
    except DatasetError as error:  # a dataset's files are wrong: every problem, no traceback
        return dataset_files_error(parser.prog, error)


def _run(parser, args) -> int:
    from glue_jobs.decoding.routes import RouteError

    routed = args.command in ("run-local", "generate") and (args.route_field is not None or args.route)
    if args.command in ("generate", "run-local") and not routed:  # a routed run's datasets are its --route targets
        from glue_jobs import datasets

        try:
            args.dataset = datasets.chosen(args.dataset)
        except datasets.DatasetError as error:
            parser.error("; ".join(error.problems))
    if args.command == "generate":
        from glue_jobs.generate_command import run_generate

        try:
            return run_generate(parser, args, _routes(parser, args))
        except RouteError as error:
            parser.error(str(error))
    from glue_jobs.commit.ownership import OwnershipError
    from glue_jobs.local_runner import configure_logging, run_local

    configure_logging()
    try:
        routes = _routes(parser, args) if args.command == "run-local" else _schema_routes(parser, args)
    except RouteError as error:
        parser.error(str(error))
    if not args.quiet:  # Spark takes seconds to start: say what is starting before it does (stderr: not the results)
        source = f"topic {args.topic}" if args.command == "run-kafka" else f"the files in {args.input}"
        target = (f"datasets {', '.join(routes.datasets)} routed by {routes.field}" if routes is not None
                  else f"dataset {args.dataset}")
        print(f"{parser.prog}: starting a local Spark session to stream {source} into {args.lake} as {target}"
              f"{' (once: what is there now)' if args.once else ' (until Ctrl-C)'}; a line per micro-batch "
              "follows", file=sys.stderr, flush=True)
    try:
        if args.command == "run-kafka":
            return _run_kafka(args, routes)
        run_local(input_dir=args.input, lake_dir=args.lake, dead_letter_dir=args.dead_letter,
                  checkpoint_dir=args.checkpoint, once=args.once, max_files_per_batch=args.max_files_per_batch,
                  source_name=args.source_name, trigger_seconds=args.trigger_seconds, dataset=args.dataset,
                  routes=routes, progress=not args.quiet)
    except (FileNotFoundError, NotADirectoryError, PermissionError, OwnershipError, RouteError) as error:  # RouteError: a
        # routed dataset that lacks the field (glue_jobs/decoding/routes.py RouteTable.problems)
        parser.error(str(error))
    return 0


def _pair(key: str):
    """An argparse type of KEY=DATASET (--route: VALUE=DATASET, --route-schema: SCHEMA=DATASET), DATASET a dataset
    folder's name; the refusal names the form the option takes."""
    def parsed(text: str) -> tuple[str, str]:
        value, equals, dataset = text.rpartition("=")
        if not equals or not value:
            raise argparse.ArgumentTypeError(f"{text!r} is not {key}=DATASET")
        return value, dataset_name(dataset)
    return parsed


_route, _schema_route = _pair("VALUE"), _pair("SCHEMA")


def _routes(parser, args):
    """The run's RouteTable from --route-field and --route, or None; either without the other, or with --dataset, is a
    usage error."""
    from glue_jobs.decoding.routes import RouteTable

    if args.route_field is None and not args.route:
        return None
    if args.route_field is None or not args.route:
        parser.error("--route-field and --route go together: the field says which value, each --route where it goes")
    if args.dataset is not None:
        parser.error("--dataset names the one dataset of an unrouted run; a routed run's datasets are its --route targets")
    return RouteTable.of(args.route_field, _one_dataset_each(parser, "--route", args.route), field_key="--route-field",
                         values_key="--route")


def _one_dataset_each(parser, option: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """`option`'s KEY=DATASET pairs as a dict; a key given two datasets is a usage error."""
    found: dict[str, str] = {}
    for key, dataset in pairs:
        if found.get(key, dataset) != dataset:
            parser.error(f"{option} {key}= names two datasets ({found[key]}, {dataset})")
        found[key] = dataset
    return found


def _schema_routes(parser, args):
    """run-kafka's SchemaRoutes from --route-schema, or None; with --schema-name or --dataset, or neither given, a usage
    error."""
    from glue_jobs.decoding.schema_routes import SchemaRoutes

    if not args.route_schema:
        if args.schema_name is None or args.dataset is None:
            parser.error("run-kafka needs --schema-name and --dataset (a topic of one dataset) or --route-schema (several)")
        return None
    if args.schema_name is not None or args.dataset is not None:
        parser.error("--route-schema names each dataset and its schema; --schema-name and --dataset are for a topic of one")
    return SchemaRoutes.of(args.registry_name, _one_dataset_each(parser, "--route-schema", args.route_schema),
                           registry_key="--registry-name", values_key="--route-schema")


def _run_kafka(args, routes) -> int:
    import boto3

    from glue_jobs import datasets
    from glue_jobs.decoding.registry_frames import RegistryVersions
    from glue_jobs.local_kafka import run_local_kafka

    glue = boto3.client("glue")
    registry = None if routes is not None else RegistryVersions(glue, registry_name=args.registry_name,
                                                                schema_name=args.schema_name, dataset=datasets.load(args.dataset))
    run_local_kafka(bootstrap_servers=args.bootstrap_servers, topic=args.topic, partitions=args.partitions, registry=registry,
                    routes=routes, glue=glue if routes is not None else None,
                    lake_dir=args.lake, dead_letter_dir=args.dead_letter, checkpoint_dir=args.checkpoint,
                    source_name=args.source_name, dataset=args.dataset, starting_offsets=args.starting_offsets,
                    max_offsets_per_trigger=args.max_offsets_per_trigger, once=args.once, trigger_seconds=args.trigger_seconds,
                    progress=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
