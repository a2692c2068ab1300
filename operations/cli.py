"""`streamlake <command>`: the operations commands (docs/operations.md has examples; `python -m operations` is the same).

  produce          send NDJSON or replay dead letters to an environment's Kinesis stream
  schema-evolve    register a schema version, update the catalog tables, restart the jobs
  job start|stop|status|reset-checkpoint   control one source's streaming job
  compact          start the compaction job for one hour, or for the lookback window (--scan)
  outputs          which stack outputs the tools read, and which are missing
  dataset new|check   draft a dataset's files from sample records / run its contract over them locally

Every command but dataset takes --environment (an environment of config/environments.json; --env is its
deprecated old spelling) and finds resource names in the outputs of the environment's stack. Exit codes: 0 ok,
1 refused or failed, 2 bad usage, 3 dataset check: records above --max-failure-rate, 130 interrupted.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from operations.errors import ToolError
from streamlake.options import Parser, add_renamed, exit_codes

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _int_in(low: int, high: int, kind=int):
    """An argparse type: a `kind` (int, or float) from `low` to `high`."""
    def parse(text: str) -> int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:g} is outside {low}..{high}")
        return value
    return parse


_percent = _int_in(0, 100, float)


def _date(text: str) -> str:
    try:
        if not _DATE_RE.match(text):
            raise ValueError
        datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None
    return text


def _field_name(text: str) -> str:
    if not text or not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


EPILOG = exit_codes("3 dataset check: more records fail the contract than --max-failure-rate allows",
                    "130 interrupted (Ctrl-C)")


def build_parser(prog: str = "python -m operations") -> argparse.ArgumentParser:
    """The operations commands' parser; `prog` is the program name (`streamlake` when run as streamlake <command>)."""
    common = Parser(add_help=False)
    add_renamed(common, "--environment", "--env", required=True,
                help="environment name in config/environments.json, e.g. dev")
    common.add_argument("--config", help="environment config file (default: config/environments.json)")
    common.add_argument("--region", help="AWS region (default: the environment's configured region, then "
                                         "AWS_REGION / AWS_DEFAULT_REGION)")
    common.add_argument("--profile", help="AWS profile name")
    common.add_argument("--endpoint-url", help="AWS endpoint override (also read from AWS_ENDPOINT_URL), "
                                               "e.g. a moto server")

    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0], epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command", help="what to run")

    produce = commands.add_parser(
        "produce", parents=[common], help="send NDJSON or dead letters to a source (Kinesis or MSK)", epilog=EPILOG,
        description="Send records to the source's Kinesis stream (PutRecords) or MSK topic (Schema Registry frames).")
    produce.add_argument("--source", help="source name, e.g. clickstream (a Kinesis stream) or orders (the MSK topic); "
                                          "give --source, --dataset or both")
    produce.add_argument("--dataset", type=_dataset_name,
                         help="the dataset to send: its one source in --environment is found in the config; with "
                              "--source, a routed MSK topic's dataset whose schema frames the records")
    what = produce.add_mutually_exclusive_group(required=True)
    what.add_argument("--file", help="newline-delimited JSON file (.gz allowed); blank lines are skipped")
    what.add_argument("--dead-letters", nargs="?", const="", metavar="LOCATION",
                      help="replay dead letters: a local file/dir or s3:// prefix of Parquet or JSON Lines with a "
                           "'payload' column; without LOCATION, the source's dead-letter path from the stack")
    produce.add_argument("--ingest-date", type=_date, help="with --dead-letters: only ingest_date=YYYY-MM-DD")
    produce.add_argument("--reason", action="append", default=[],
                         help="with --dead-letters: only this reason code (repeatable)")
    produce.add_argument("--unsent-file", help="where records not sent are written (default: "
                                               "unsent-<stream or topic>-<UTC time>.jsonl in the current directory)")
    produce.add_argument("--no-progress", action="store_true", help="no progress bar on stderr (Kinesis)")
    kinesis = produce.add_argument_group("Kinesis sources")
    kinesis.add_argument("--partition-key-field", type=_field_name, default=None,
                         help="JSON field whose value is the partition key (default event_id); records without a "
                              "usable value get the MD5 hex of the record")
    kinesis.add_argument("--max-attempts", type=_int_in(1, 20), default=None,
                         help="PutRecords calls per batch before giving up (default 5)")
    kinesis.add_argument("--backoff-base-ms", type=_int_in(0, 60_000), default=None,
                         help="first retry delay; doubles per attempt, with jitter (default 100)")
    kinesis.add_argument("--backoff-max-ms", type=_int_in(0, 300_000), default=None,
                         help="longest retry delay (default 5000)")
    kinesis.add_argument("--allow-invalid-json", action="store_true",
                         help="send lines that are not valid JSON (to exercise the dead-letter path)")
    kafka = produce.add_argument_group("MSK sources")
    kafka.add_argument("--bootstrap-servers", help="brokers to send to (default: the stack's MskBootstrapServers, "
                                                   "SASL/IAM on port 9098)")
    kafka.add_argument("--kafka-auth", choices=("iam", "none"), default=None,
                       help="iam (default): SASL OAUTHBEARER with an MSK IAM token; none: a broker without auth, "
                            "e.g. a local test broker")
    kafka.add_argument("--timeout-seconds", type=_int_in(1, 3600), default=None,
                       help="how long the client retries each record before it goes to the unsent file (default 120)")

    evolve = commands.add_parser(
        "schema-evolve", parents=[common], help="check a schema version, then restart the jobs once it is deployed",
        epilog=EPILOG,
        description="Check the schema against the registry (latest and checkpoint version); before its deploy, say "
                    "what to commit and deploy; after it, restart the streaming jobs; then roll out producers.")
    evolve.add_argument("--dataset", type=_dataset_name, default=None,
                        help="the dataset whose schema evolves (default: the environment's only dataset; required "
                             "when it binds several)")
    evolve.add_argument("--schema-file", default=None,
                        help="Avro schema file (default: the dataset's newest committed datasets/<name>/schema.v<N>.avsc)")
    evolve.add_argument("--dry-run", action="store_true", help="print the plan; call no mutating API")
    evolve.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    evolve.add_argument("--stop-timeout", type=_int_in(1, 3600), default=600,
                        help="seconds to wait for each job to stop (default 600)")

    job = commands.add_parser("job", help="control one source's streaming job", epilog=EPILOG,
                              description="Control one source's streaming job.")
    job_commands = job.add_subparsers(dest="job_command", required=True, metavar="action", help="what to do with the job")
    for name, help_ in (("start", "start the streaming job (and let the job keeper restart it again)"),
                        ("stop", "stop the current run and hold the job: the job keeper leaves it stopped"),
                        ("status", "current run and consumer lag"),
                        ("reset-checkpoint", "delete the job's checkpoint (job must be stopped)")):
        sub = job_commands.add_parser(name, parents=[common], help=help_, description=help_, epilog=EPILOG)
        sub.add_argument("--source", required=True, help="source name, e.g. clickstream")
        if name == "stop":
            sub.add_argument("--no-wait", action="store_true", help="return once the stop was requested")
            sub.add_argument("--yes", action="store_true",
                             help="do not ask for confirmation when the job runs other sources too (they stop with it)")
            sub.add_argument("--timeout", type=_int_in(1, 3600), default=600,
                             help="seconds to wait for the run to stop (default 600)")
        if name == "reset-checkpoint":
            sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    compact = commands.add_parser("compact", parents=[common], help="compact one hour of the lake now, or scan the lookback",
                                  description="Start the compaction job for one hour, or for its lookback window (--scan).",
                                  epilog=EPILOG)
    which = compact.add_mutually_exclusive_group(required=True)
    which.add_argument("--hour", help="UTC hour YYYY-MM-DDTHH, e.g. 2024-05-01T13")
    which.add_argument("--scan", action="store_true",
                       help="every hour of the lookback window (compaction.lookback_hours) instead of the partitions "
                            "log: for files written by anything but the streaming jobs")

    commands.add_parser("outputs", parents=[common], help="stack outputs the tools need, and which are missing",
                        description="Which stack outputs the tools read, and which are missing.", epilog=EPILOG)

    dataset = commands.add_parser("dataset", help="onboard a dataset from sample records (no AWS needed)",
                                  description="Onboard a dataset from sample records (no AWS needed).", epilog=EPILOG)
    dataset_commands = dataset.add_subparsers(dest="dataset_command", required=True, metavar="action", help="what to do with the dataset")
    new = dataset_commands.add_parser("new", help="draft datasets/NAME/ (dataset.json, schema.v1.avsc) from samples",
                                      epilog=EPILOG,
                                      description="Draft a dataset's files from sample records and say what was guessed.")
    new.add_argument("name", help="the dataset's folder name under datasets/")
    new.add_argument("--sample", required=True, type=Path, help="newline-delimited JSON records")
    new.add_argument("--datasets-dir", type=Path, default=None,
                     help="the datasets folder to write into (default: the project's, the one synth and every command "
                          "read: STREAMLAKE_DATASETS, else datasets/ beside the code)")
    new.add_argument("--unknown-fields", choices=("reject", "keep", "drop"), default="reject",
                     help="what the contract does with a record's field the schema does not know: reject (a dead letter, "
                          "the default), keep (stored as JSON text in the _unknown_fields column) or drop (counted); "
                          "written to dataset.json")
    check = dataset_commands.add_parser("check", help="run a dataset's real contract over sample records locally",
                                        epilog=EPILOG,
                                        description="Counts per reason, the first dead letters, the lake table's schema.")
    check.add_argument("name", help="a dataset under datasets/")
    check.add_argument("--sample", required=True, type=Path, help="newline-delimited JSON records")
    check.add_argument("--show", type=_int_in(0, 1000), default=10, help="dead letters to print (default 10)")
    check.add_argument("--pin", action="store_true",
                       help="when the check passes, record the newest schema version's digest in schemas.lock.json: "
                            "the version is then final (a pinned version never changes; the next is schema.v<N+1>.avsc)")
    check.add_argument("--max-failure-rate", type=_percent, default=0.0, metavar="PERCENT",
                       help="the share of records that may fail the contract, in percent, before the command exits 3 "
                            "(default 0: any failing record fails the check, so it can gate a pull request)")
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog or "python -m operations")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # AWS errors not handled where they happen: one line, not a traceback
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            op = getattr(exc, "operation_name", "AWS call")
            print(f"error: {op} failed: {error.get('Code')}: {error.get('Message')}", file=sys.stderr)
            return 1
        if isinstance(exc, BotoCoreError):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


def _dataset_name(name: str) -> str:
    from glue_jobs.datasets import dataset_name

    return dataset_name(name)


def _context(args):
    from operations.aws import Clients
    from operations.resources import StackOutputs, load_environment

    env = load_environment(args.environment, args.config)
    region = args.region or env.region
    clients = Clients(region=region, profile=args.profile, endpoint_url=args.endpoint_url)
    if clients.session.region_name is None:
        raise ToolError(f"no AWS region: environment {env.name!r} configures none; pass --region or set AWS_REGION")
    outputs = StackOutputs.fetch(clients.cloudformation, env.stack_name)
    return env, clients, outputs


def _run(args) -> int:
    if args.command == "produce":
        return _produce(args)
    if args.command == "schema-evolve":
        return _schema_evolve(args)
    if args.command == "job":
        return _job(args)
    if args.command == "compact":
        return _compact(args)
    if args.command == "outputs":
        return _outputs(args)
    if args.command == "dataset":
        return _dataset(args)
    raise ToolError(f"unknown command {args.command!r}")  # argparse prevents this


def _dataset(args) -> int:
    from glue_jobs import datasets

    if args.dataset_command == "new":
        from operations.dataset_draft import write_draft

        root = Path(str(args.datasets_dir or datasets.root()))
        notes = write_draft(root, args.name, args.sample, args.unknown_fields)
        print(f"drafted {root / args.name}/dataset.json and schema.v1.avsc; guessed:")
        for note in notes:
            print(f"  - {note}")
        if args.datasets_dir is None and not Path.cwd().resolve().is_relative_to(root.resolve().parent):
            print(f"note: written to the project's datasets folder ({root}), which every command and synth read; this "
                  "directory is outside the project (--datasets-dir writes elsewhere; STREAMLAKE_DATASETS points every "
                  "command at another datasets folder)")
        print("check: the types (a decimal is drafted as double, an enum as string), the key, the event time, and add rules; "
              f"then `streamlake dataset check {args.name} --sample {args.sample} --pin` (runs the contract over the "
              "samples and, when they pass, pins the schema version in schemas.lock.json)")
        return 0
    from operations.dataset_check import check

    print(f"streamlake dataset check: starting a local Spark session to run {args.name}'s contract over {args.sample}",
          file=sys.stderr, flush=True)  # Spark takes seconds to start; stderr: the counts below are the results
    counts = check(args.name, args.sample, show=args.show)
    if not counts:
        print(f"error: --sample {args.sample} holds no record", file=sys.stderr)
        return 1
    code = failure_rate_exit(counts, args.max_failure_rate)
    return _pin(args.name, pin=args.pin and code == 0, refused=args.pin and code != 0) or code


def _pin(name: str, *, pin: bool, refused: bool) -> int:
    """Say whether the newest schema version of `name` is pinned in schemas.lock.json, and pin it when asked (0), or
    refuse to (3, one line on stderr) when the check failed. The versions and the lock are the ones glue_jobs.datasets
    reads (a draft: only the newest may be unpinned)."""
    import json

    from glue_jobs import datasets

    dataset = datasets.load(name, draft=True)
    lock_path = Path(str(datasets.root())) / name / datasets.LOCK_FILE
    file_name = f"schema.v{dataset.latest_version}.avsc"
    lock = json.loads(lock_path.read_text(encoding="utf-8")) if lock_path.exists() else {}
    if file_name in lock:
        return 0
    digest = datasets.file_digest((lock_path.parent / file_name).read_bytes())
    if refused:
        print(f"error: {file_name} not pinned: records fail the contract (fix them, or allow a share with "
              "--max-failure-rate, then --pin again)", file=sys.stderr)
        return 3
    if not pin:
        print(f"{file_name} is not pinned yet: once it is final, run again with --pin (it adds \"{file_name}\": "
              f"\"{digest}\" to {lock_path})")
        return 0
    lock[file_name] = digest
    lock_path.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    print(f"pinned {file_name} in {lock_path}: this version is final; a change to the schema is "
          f"schema.v{dataset.latest_version + 1}.avsc")
    return 0


def failure_rate_exit(counts: dict[str, int], max_failure_rate: float) -> int:
    """`dataset check`'s exit code: 0 when at most `max_failure_rate` percent of the records failed the contract, else 3
    (with one line on stderr saying how many)."""
    total = sum(counts.values())
    failed = total - counts.get("valid", 0)
    rate = 100.0 * failed / total
    if rate > max_failure_rate:
        print(f"error: {failed} of {total} record(s) ({rate:.1f}%) fail the contract, above --max-failure-rate "
              f"{max_failure_rate:g}%", file=sys.stderr)
        return 3
    return 0


_KINESIS_OPTIONS = {"partition_key_field": "event_id", "max_attempts": 5, "backoff_base_ms": 100, "backoff_max_ms": 5_000}
_KAFKA_OPTIONS = {"bootstrap_servers": None, "kafka_auth": "iam", "timeout_seconds": 120}


def _options_for(args, kind: str) -> None:
    """Refuse the other source kind's options (a silently ignored option is a wrong expectation), then fill defaults."""
    own, other = (_KINESIS_OPTIONS, _KAFKA_OPTIONS) if kind == "kinesis" else (_KAFKA_OPTIONS, _KINESIS_OPTIONS)
    given = [name for name in other if getattr(args, name) is not None]
    if kind == "kafka" and args.allow_invalid_json:
        given.append("allow_invalid_json")
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ToolError(f"{flags}: only for {'MSK' if kind == 'kinesis' else 'Kinesis'} sources; --source "
                        f"{args.source!r} is {'a Kinesis stream' if kind == 'kinesis' else 'the MSK topic'}")
    for name, default in own.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def _produce_source(args, env) -> str:
    """--source as given (checked), or the one source of --dataset in the environment. Both: a routed MSK topic and
    one of its datasets (the one whose registry schema frames the records: docs/kafka.md "One topic, several
    datasets"); a mix is sent as one call per dataset."""
    if args.source is None and args.dataset is None:
        raise ToolError("give --source, --dataset, or both (a routed MSK topic and the dataset to send)")
    if args.source is not None:
        source = env.check_source(args.source)
        carried = env.config.carried[source]
        if args.dataset is not None and (source not in env.config.msk.source_names or not env.config.msk.routed):
            raise ToolError(f"--dataset with --source: only for a routed MSK topic, whose records are framed with the "
                            f"dataset's schema; source {source!r} carries {', '.join(carried)}: leave --dataset out")
        if args.dataset is not None and args.dataset not in carried:
            raise ToolError(f"--dataset {args.dataset!r} is not carried by source {source!r} (its datasets: "
                            f"{', '.join(carried)})")
        if args.dataset is None and len(carried) > 1 and source in env.config.msk.source_names:
            raise ToolError(f"source {source!r} is a routed MSK topic carrying {', '.join(carried)}: pass --dataset too "
                            "(each record is framed with that dataset's registry schema)")
        return source
    carrying = list(env.config.sources_of(args.dataset))
    if len(carrying) > 1 and set(carrying) <= set(env.config.msk.source_names):
        return carrying[0]  # the partition groups' jobs of one topic: the records go to that topic either way
    if len(carrying) != 1:
        found = f"sources {', '.join(carrying)} carry it: pass --source too" if carrying else "no source carries it"
        raise ToolError(f"--dataset {args.dataset!r} in environment {env.name!r}: {found}")
    return carrying[0]


def _produce(args) -> int:
    if args.file is not None and (args.ingest_date or args.reason):
        raise ToolError("--ingest-date and --reason only apply with --dead-letters")
    if args.reason:
        from glue_jobs.contract import REASON_CODES
        from operations.kafka_producer import NOT_SENT, NOT_SENT_FRAME

        known = (*REASON_CODES, NOT_SENT, NOT_SENT_FRAME)
        unknown = [r for r in args.reason if r not in known]
        if unknown:
            raise ToolError(f"--reason {unknown[0]!r} is not a reason code; known: {', '.join(known)}")
    if args.unsent_file and not args.unsent_file.lower().endswith(".jsonl"):
        # The unsent file is replayed with --dead-letters, which reads JSON Lines by their .jsonl name.
        raise ToolError(f"--unsent-file {args.unsent_file!r}: must end in .jsonl (it is replayed with --dead-letters)")
    from operations import producer

    if args.file is not None:
        items = producer.NdjsonFile(args.file)  # checks the file exists before any AWS call

    env, clients, outputs = _context(args)
    args.source = _produce_source(args, env)
    kind = "kinesis" if args.source in env.kinesis_sources() else "kafka"
    _options_for(args, kind)
    if args.backoff_max_ms is not None and args.backoff_max_ms < args.backoff_base_ms:
        raise ToolError(f"--backoff-max-ms {args.backoff_max_ms} is below --backoff-base-ms {args.backoff_base_ms}")
    if args.file is None:
        location = args.dead_letters or outputs.dead_letter_path(args.source)
        if args.ingest_date:
            location = location.rstrip("/") + f"/ingest_date={args.ingest_date}/"
        items = producer.DeadLetters(location, tuple(args.reason), s3=clients.s3)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if kind == "kafka":
        return _produce_kafka(args, env, clients, outputs, items, stamp)

    from operations.progress import Progress

    stream = outputs.kinesis_stream(args.source)
    total = producer.check_all(items, partition_key_field=args.partition_key_field,
                               allow_invalid_json=args.allow_invalid_json)
    if total == 0:
        print(f"nothing to send: no records in {args.file or location}")
        _say_blank_lines(items)
        return 0
    unsent = Path(args.unsent_file or f"unsent-{stream}-{stamp}.jsonl")
    backoff = producer.Backoff(base_s=args.backoff_base_ms / 1000, max_s=args.backoff_max_ms / 1000)
    progress = Progress(total, enabled=not args.no_progress)
    records = producer.to_records(items, partition_key_field=args.partition_key_field,
                                  allow_invalid_json=args.allow_invalid_json)
    result = producer.send(clients.kinesis, stream, records, total=total, max_attempts=args.max_attempts,
                           backoff=backoff, unsent_path=unsent, progress=progress)
    print(f"sent {result.sent} of {total} records to {stream} in {result.requests} PutRecords call(s)"
          f"{f', {result.retried} entries retried' if result.retried else ''}"
          f"{f', up to {result.possible_duplicates} possibly written twice (resent after a server error)' if result.possible_duplicates else ''}")
    _say_blank_lines(items)
    return 0


def _say_blank_lines(items) -> None:
    blank = getattr(items, "blank_lines", 0)
    if blank:
        print(f"skipped {blank} blank line(s) of {items.path}: a blank line is no record, so none was sent for it")


def _produce_kafka(args, env, clients, outputs, items, stamp: str) -> int:
    """Send to the MSK topic: every record framed with the newest registered version (looked up, never registered)."""
    from glue_jobs import datasets
    from operations import kafka_producer
    from operations.producer import DeadLetters

    carried = env.config.carried[args.source]
    dataset = datasets.load(args.dataset if len(carried) > 1 else carried[0])  # a routed topic: --dataset (checked)
    version_id = kafka_producer.newest_registered(
        clients.glue, registry_name=outputs.schema_registry(), schema_name=outputs.dataset_schema(dataset.name),
        dataset=dataset)
    topic = outputs.kafka_topic()
    settings = kafka_producer.client_settings(
        args.bootstrap_servers or outputs.kafka_bootstrap_servers(), auth=args.kafka_auth,
        region=clients.session.region_name, profile=args.profile, timeout_s=args.timeout_seconds)
    rows = items.rows() if isinstance(items, DeadLetters) else ((where, data, None) for where, data in items)
    payloads = []
    for where, data, reason in rows:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ToolError(f"{where}: not UTF-8 ({error.reason} at byte {error.start}); nothing was sent") from None
        payloads.append((where, kafka_producer.replay_payload(where, text, reason)))
    if not payloads:
        print(f"nothing to send: no records in {args.file or args.dead_letters or 'the dead letters'}")
        return 0
    unsent = Path(args.unsent_file or f"unsent-{topic}-{stamp}.jsonl")
    result = kafka_producer.send(settings, topic, payloads, kafka_producer.AvroFramer(dataset, version_id),
                                 unsent_path=unsent, flush_seconds=args.timeout_seconds + 30)
    partitions = sorted({partition for partition, _ in result.offsets})
    print(f"sent {result.sent} of {len(payloads)} records to topic {topic} (partitions {partitions}) as dataset "
          f"{dataset.name} v{dataset.latest_version} ({version_id})")
    _say_blank_lines(items)
    if result.failed:
        print(f"{len(result.failed)} not confirmed (first: {result.failed[0][0]}: {result.failed[0][1]}); written to "
              f"{result.unsent_path}: send them again with --dead-letters {result.unsent_path}")
        return 1
    return 0


def _schema_evolve(args) -> int:
    from glue_jobs import datasets as dataset_files
    from operations import schema_evolution
    from operations.resources import load_environment

    env = load_environment(args.environment, args.config)
    bound = list(env.config.datasets)
    name = args.dataset
    if name is None:
        if len(bound) != 1:
            raise ToolError(f"--dataset is required: environment {args.environment!r} binds {len(bound)} datasets "
                            f"({', '.join(bound) or 'none'})")
        name = bound[0]
    if name not in bound:
        raise ToolError(f"--dataset {name!r} is not bound to a source of environment {args.environment!r} (bound: {', '.join(bound)})")
    try:
        dataset = dataset_files.load(name)
    except dataset_files.DatasetError as error:
        raise ToolError(str(error)) from None
    repo = Path(__file__).resolve().parents[1]
    schema_file = args.schema_file or str(repo / schema_evolution.newest_file(dataset))
    schema_evolution.read_schema_file(schema_file)  # a bad file fails before any AWS call
    env, clients, outputs = _context(args)
    sources = list(env.config.sources_of(name))
    targets = schema_evolution.Targets(
        dataset=dataset,
        registry=outputs.schema_registry(),
        schema_name=outputs.dataset_schema(name),
        database=outputs.catalog_database(),
        # a routed stream's table holds its route field only (infra/catalog.py): no dataset's schema to evolve there
        source_tables={s: outputs.source_table(s) for s in sources if s in env.kinesis_sources() and s not in env.config.routes},
        lake_table=outputs.dataset_lake_table(name),
        streaming_jobs={s: outputs.streaming_job(s) for s in sources},
    )
    plan = schema_evolution.build_plan(clients.glue, targets, schema_file)
    print(f"plan for dataset {name} of {env.stack_name} with {schema_file}"
          f"{' (dry run: nothing will be changed)' if args.dry_run else ''}:")
    for line in plan.lines():
        print("  " + line)
    if plan.problems:
        raise ToolError(f"the new schema is refused (registry {plan.compatibility} compatibility or the lake's rules); "
                        "nothing was changed (see step 1 above)")
    if not plan.deployed:
        print(f"nothing changed: commit the file as {plan.next_file}, pin its digest in "
              f"datasets/{name}/schemas.lock.json (`streamlake dataset check {name}` prints the line), deploy, "
              "then run this command again")
        return 0
    if plan.drift:
        raise ToolError("the deployed catalog does not follow the schema; nothing was changed (see step 3 above)")
    if args.dry_run:
        return 0
    if not plan.jobs_to_restart:
        print("nothing to restart: no streaming job is running; they load the new schema when started")
        return 0
    _confirm(args.yes, f"restart the streaming jobs of dataset {name} in {env.stack_name}? type yes: ", "yes")
    schema_evolution.execute(clients.glue, plan, stop_timeout_s=args.stop_timeout)
    return 0


def _confirm(assume_yes: bool, prompt: str, expected: str) -> None:
    if assume_yes:
        return
    if not sys.stdin.isatty():
        raise ToolError("confirmation needed: run in a terminal to answer the prompt, or pass --yes")
    if input(prompt).strip() != expected:
        raise ToolError("not confirmed; nothing changed")


def _job(args) -> int:
    from operations import jobs

    env, clients, outputs = _context(args)
    env.check_source(args.source)
    job_name = outputs.streaming_job(args.source)
    # A source of a shared job (config `streaming_jobs`) is one query of that job: the job starts, stops and holds with
    # all its sources together; a checkpoint reset is one source's.
    sources = env.config.job_of(args.source).sources
    others = [source for source in sources if source != args.source]
    if args.job_command == "start":
        jobs.release(clients.glue, jobs.job_arn(clients.session, job_name))
        run_id = jobs.start(clients.glue, job_name, busy_hint="it is running (the hold is released)")
        print(f"started {job_name}: run {run_id}")
        print("hold released: the job keeper restarts it again if it stops")
    elif args.job_command == "stop":
        if others:
            print(f"{job_name} runs sources {', '.join(sources)}: stopping it stops and holds {', '.join(others)} too "
                  "(each resumes from its own checkpoint at `job start`)")
            _confirm(args.yes, f"stop all {len(sources)} sources of {job_name}? type yes: ", "yes")
        # Held first: the job keeper leaves a job stopped on purpose alone until `job start`.
        jobs.hold(clients.glue, jobs.job_arn(clients.session, job_name), reason="job stop")
        run = jobs.stop(clients.glue, job_name, wait=not args.no_wait, timeout_s=args.timeout)
        if run is None:
            print(f"{job_name} has no active run; nothing to stop")
        elif args.no_wait:
            print(f"stop requested for {job_name} run {run.run_id}")
        else:
            print(f"stopped {job_name} run {run.run_id}: {run.state}")
    elif args.job_command == "status":
        for line in jobs.status_lines(clients.glue, clients.cloudwatch, job_name):
            print(line)
        print(f"sources:      {', '.join(sources)}" + (" (one job: they start and stop together)" if others else ""))
        for source in sources:
            print(f"  {source}: {jobs.last_batch_line(clients.s3, outputs.checkpoint_path(source))}")
    elif args.job_command == "reset-checkpoint":
        confirm = input if sys.stdin.isatty() else None
        jobs.reset_checkpoint(clients.glue, clients.s3, job_name, outputs.checkpoint_path(args.source), args.source,
                              assume_yes=args.yes, confirm=confirm)
        if others:
            print(f"the job's other sources ({', '.join(others)}) keep their checkpoints")
    return 0


def _compact(args) -> int:
    from operations import jobs
    from operations.resources import load_environment

    hour = None
    if args.hour is not None:
        grace = load_environment(args.environment, args.config).config.compaction.grace_minutes
        hour = jobs.parse_hour(args.hour, grace_minutes=grace)  # validated before any AWS call
    _env, clients, outputs = _context(args)
    job_name = outputs.compaction_job()
    run_id = jobs.compact(clients.glue, job_name, hour, scan=args.scan)
    print(f"started {job_name} for {f'hour {hour}' if hour else 'the lookback window (--scan)'}: run {run_id}")
    return 0


def _outputs(args) -> int:
    from operations.resources import required_output_keys

    env, _clients, outputs = _context(args)
    needed = required_output_keys(env.config.source_names, env.kinesis_sources(), env.config.datasets)
    missing = [k for k in needed if k not in outputs.outputs]
    for key in needed:
        print(f"{'ok     ' if key in outputs.outputs else 'MISSING'} {key}"
              + (f" = {outputs.outputs[key]}" if key in outputs.outputs else ""))
    if missing:
        raise ToolError(f"{len(missing)} output(s) the tools need are missing from {env.stack_name}")
    return 0
