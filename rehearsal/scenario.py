"""An environment's rehearsal: every streaming job fed held input, then compaction, then the checks.

- Kinesis jobs get NDJSON lines (glue_jobs.generate: valid events, bad records of every kind,
  duplicates); Kafka jobs get decoded Avro records (what Glue's Schema-Registry table delivers: valid
  events, out-of-range times and duplicates; bytes that do not decode never reach the job).
- A streaming job runs until its commit markers account for every held record, then is stopped; with
  `kill_after_batches` it is first SIGKILLed once that many batches are committed and run again on the
  same checkpoint.
- Checks: counts reconcile per source (records = written + dead letters + duplicates), every valid
  event is in the lake exactly once and every bad record is a dead letter with its payload, compaction
  ran Job.init/commit and left every row in place, and the metrics that reached CloudWatch (a moto
  server) carry every name and dimension set the template's StreamLake alarms watch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rehearsal.assembly import Assembly, GlueJob, RehearsalError
from rehearsal.run import JobRun, LocalS3, run_job
from rehearsal.runtime import SparkLine

HOUR_MS = 3_600_000
# Every held event lies in a closed hour inside compaction's default lookback (48 h).
HELD_EVENTS_END_HOURS_AGO = 1
STATE_DIR = "_streamlake"  # glue_jobs.commit.STATE_DIR: where the commit markers are


@dataclass
class HeldInput:
    folder: Path
    records: int
    valid_event_ids: list[str]
    bad_payloads: list[str]  # the dead letters' payloads, as the job must keep them
    duplicates: int


@dataclass
class SourceResult:
    source: str
    held: HeldInput
    runs: list[JobRun] = field(default_factory=list)
    committed: dict = field(default_factory=dict)  # summed BatchStats of the commit markers


@dataclass
class EnvironmentResult:
    environment: str
    sources: dict[str, SourceResult] = field(default_factory=dict)
    compaction: JobRun | None = None
    metrics: set[tuple[str, frozenset]] = field(default_factory=set)  # (name, {(dimension, value)})
    alarm_metrics: set[tuple[str, frozenset]] = field(default_factory=set)


def _end_ms() -> int:
    now = int(time.time() * 1000)
    return now - now % HOUR_MS - HELD_EVENTS_END_HOURS_AGO * HOUR_MS


def kinesis_input(folder: Path, *, records: int, files: int, seed: int, dataset: str = "clickstream") -> HeldInput:
    """NDJSON lines of the job's dataset: clickstream's own generator, or any dataset's (glue_jobs.dataset_generate)
    with its events in the closed hours before _end_ms."""
    if dataset != "clickstream":
        from datetime import datetime, timezone

        from glue_jobs import datasets
        from glue_jobs.dataset_generate import generate_dataset

        end = datetime.fromtimestamp(_end_ms() / 1000, timezone.utc)
        expect = generate_dataset(datasets.load(dataset), folder, records=records, files=files, bad_ratio=0.05, seed=seed,
                                  hours=24, end=end)
        return HeldInput(folder, records, expect.valid_keys, expect.bad_payloads, expect.duplicates)
    from glue_jobs.generate import generate

    expect = generate(folder, records=records, files=files, bad_ratio=0.05, seed=seed, base_time_ms=_end_ms())
    return HeldInput(folder, records, expect.valid_event_ids, expect.bad_lines, expect.duplicates)


def dataset_kafka_input(folder: Path, *, records: int, files: int, seed: int, dataset: str) -> HeldInput:
    """Decoded Avro records of any dataset as JSON lines (what the Schema-Registry table delivers: every value of
    its Avro type, decimals as numbers, enums and dates as strings): the dataset generator's valid records, one
    event time in 50 beyond max_future (a valid Avro value the contract refuses), and each file's first record
    repeated once (a producer retry). A refused record's dead-letter payload is Spark's to_json of it."""
    import random
    from datetime import datetime, timezone

    from glue_jobs import datasets
    from glue_jobs.dataset_generate import RecordMaker, decimal_literal

    table = datasets.load(dataset)
    maker, rng = RecordMaker(table, seed), random.Random(seed)
    end = datetime.fromtimestamp(_end_ms() / 1000, timezone.utc)
    folder.mkdir(parents=True, exist_ok=True)
    held = HeldInput(folder, 0, [], [], 0)
    key = table.key[0]
    for index in range(files):
        lines = []
        for n in range(index * (records // files), (index + 1) * (records // files)):
            record = maker.valid(n, datetime.fromtimestamp(end.timestamp() - rng.randint(1, 24 * 3600), timezone.utc))
            if rng.random() < 0.02:
                record[table.event_time.field] = maker._event_time(datetime(2099, 1, 1, tzinfo=timezone.utc))
                held.bad_payloads.append(spark_to_json(table.schema, record))
            else:
                held.valid_event_ids.append(str(record[key]))
            lines.append(decimal_literal(record))
        if lines and str(json.loads(lines[0])[key]) in held.valid_event_ids:
            lines.append(lines[0])
            held.duplicates += 1
        held.records += len(lines)
        (folder / f"records-{index:05d}.json").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return held


def spark_to_json(node, value) -> str:
    """What Spark's to_json writes for a decoded value of an Avro type (null fields left out, decimals with
    their scale's digits, fields in schema order, non-ASCII unescaped)."""
    from decimal import Decimal

    if node.kind == "record":
        parts = [f"{json.dumps(f.name)}:{spark_to_json(f.type, value[f.name])}"
                 for f in node.fields if value.get(f.name) is not None]
        return "{" + ",".join(parts) + "}"
    if node.kind == "array":
        return "[" + ",".join(spark_to_json(node.items, v) for v in value) + "]"
    if node.kind == "map":
        return "{" + ",".join(f"{json.dumps(k)}:{spark_to_json(node.items, v)}" for k, v in value.items()) + "}"
    if node.kind == "decimal":
        return str(Decimal(str(value)).quantize(Decimal(1).scaleb(-node.scale)))
    if node.kind in ("float", "double"):
        raise RehearsalError("the rehearsal does not reproduce Java's rendering of a float or double in to_json")
    return json.dumps(value, ensure_ascii=False)


def kafka_input(folder: Path, *, records: int, files: int, seed: int) -> HeldInput:
    """Decoded Avro records as JSON lines: the generator's valid events (metadata as its JSON text, the Avro
    field's type), one out-of-range event time in 50 (a valid Avro long the contract refuses), and each
    file's first record repeated once (a producer retry)."""
    import random

    from glue_jobs.generate import generate

    raw = folder.parent / f"{folder.name}-generated"
    generate(raw, records=records, files=files, bad_ratio=0.0, duplicate_ratio=0.0, seed=seed, base_time_ms=_end_ms())
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    held = HeldInput(folder, 0, [], [], 0)
    for index, path in enumerate(sorted(raw.iterdir())):
        lines = []
        for text in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(text)
            if "metadata" in record and not isinstance(record["metadata"], str):
                record["metadata"] = json.dumps(record["metadata"], separators=(",", ":"))
            if rng.random() < 0.02:
                record["event_time"] = 4_102_444_800_000  # 2100-01-01: out_of_range
                held.bad_payloads.append(_avro_json(record))
            else:
                held.valid_event_ids.append(record["event_id"])
            lines.append(json.dumps(record))
        if lines and json.loads(lines[0])["event_id"] in held.valid_event_ids:
            lines.append(lines[0])
            held.duplicates += 1
        held.records += len(lines)
        (folder / f"records-{index:05d}.json").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return held


def _avro_json(record: dict) -> str:
    """The dead-letter payload of a decoded record: to_json of the contract fields in schema order, nulls
    left out (Spark's to_json), numbers as Spark writes them."""
    from glue_jobs.schema import contract_fields

    parts = []
    for f in contract_fields():
        value = record.get(f.name)
        if value is not None:
            parts.append(f"{json.dumps(f.name)}:{json.dumps(value, ensure_ascii=False)}")
    return "{" + ",".join(parts) + "}"


def avro_columns(avro_schema: dict) -> list[list[str]]:
    """The catalog columns Glue derives from a registered Avro record schema, as Spark's Avro reader maps
    its types (enum -> string, decimal -> decimal(p,s), date -> date, timestamp-millis -> timestamp, record ->
    struct, array, map; https://spark.apache.org/docs/3.3.0/sql-data-sources-avro.html "Supported types for
    Avro -> Spark SQL conversion"; that Glue's Schema-Registry table decodes the same way is unverified)."""
    from glue_jobs.dataset_types import parse_schema

    return [[f.name, f.type.catalog_type()] for f in parse_schema(avro_schema, "registered schema").fields]


def source_table(assembly: Assembly, job: GlueJob, held: HeldInput) -> dict[str, dict]:
    """The stand-in's view of the job's source table: parameters and columns as synthesized."""
    database, name = job.arguments["--catalog_database"], job.arguments["--source_table"]
    table = assembly.catalog_table(database, name)
    descriptor = table["StorageDescriptor"]
    parameters = {**table.get("Parameters", {}), **descriptor.get("Parameters", {})}
    reference = descriptor.get("SchemaReference")
    if reference:
        schema_id = reference["SchemaId"]
        registered = assembly.registered_schema(schema_id["RegistryName"], schema_id["SchemaName"])
        columns = avro_columns(registered)
    else:
        columns = [[c["Name"], c["Type"]] for c in descriptor["Columns"]]
    return {f"{database}.{name}": {"parameters": parameters, "columns": columns, "input": str(held.folder)}}


def committed_stats(s3: LocalS3, job: GlueJob) -> dict:
    folder = Path(s3.path(job.arguments["--checkpoint_path"])) / STATE_DIR
    totals = {"batches": 0, "records_in": 0, "records_written": 0, "dead_letters": 0, "duplicates_collapsed": 0}
    for marker in folder.glob("batch-*.committed.json") if folder.exists() else ():
        try:
            stats = json.loads(marker.read_text(encoding="utf-8"))
        except ValueError:
            continue  # being written (a local file is visible before it is closed): not committed yet
        totals["batches"] += 1
        for key in ("records_in", "records_written", "dead_letters", "duplicates_collapsed"):
            totals[key] += stats[key]
    return totals


def rehearse_streaming_job(assembly: Assembly, job: GlueJob, *, line: SparkLine, workdir: Path, s3: LocalS3,
                           moto_endpoint: str | None, records: int, files: int, seed: int,
                           kill_after_batches: int | None = None, timeout: float = 600,
                           observe_source_reads: bool = False) -> SourceResult:
    source, dataset = job.arguments["--source_name"], job.arguments["--dataset"]
    folder = workdir / "held" / source
    if job.arguments["--source_type"] == "kinesis":
        held = kinesis_input(folder, records=records, files=files, seed=seed, dataset=dataset)
    elif dataset == "clickstream":
        held = kafka_input(folder, records=records, files=files, seed=seed)
    else:
        held = dataset_kafka_input(folder, records=records, files=files, seed=seed, dataset=dataset)
    result = SourceResult(source, held)
    tables = source_table(assembly, job, held)
    # A run argument as an operator would pass to StartJobRun: one-second windows instead of the deployed
    # 60 s, so the held files (one per micro-batch) pass in seconds.
    run_arguments = {"--window_size_seconds": "1"}

    def all_committed() -> bool:
        return committed_stats(s3, job)["records_in"] >= held.records

    common = dict(line=line, workdir=workdir, s3=s3, tables=tables, run_arguments=run_arguments,
                  moto_endpoint=moto_endpoint, timeout=timeout, observe_source_reads=observe_source_reads)
    if kill_after_batches:
        def enough_batches() -> bool:
            return committed_stats(s3, job)["batches"] >= kill_after_batches

        result.runs.append(run_job(job, kill_when=enough_batches, **common))
    result.runs.append(run_job(job, until=all_committed, **common))
    for run in result.runs:
        if not run.stopped:
            raise RehearsalError(f"{job.logical_id} ended on its own (exit {run.returncode}):\n{run.stderr[-4000:]}")
    result.committed = committed_stats(s3, job)
    return result


def alarm_metrics(assembly: Assembly, namespace: str) -> set[tuple[str, frozenset]]:
    """(metric name, dimensions) of every alarm on `namespace`, metric-math alarms included."""
    found = set()
    for resource in assembly.resources("AWS::CloudWatch::Alarm").values():
        properties = assembly.resolve(resource["Properties"])
        stats = [properties] if "MetricName" in properties else [
            q["MetricStat"]["Metric"] for q in properties.get("Metrics", []) if "MetricStat" in q]
        for metric in stats:
            if metric.get("Namespace") == namespace:
                dimensions = frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
                found.add((metric["MetricName"], dimensions))
    return found


def received_metrics(moto_endpoint: str, namespace: str) -> set[tuple[str, frozenset]]:
    import boto3

    client = boto3.client("cloudwatch", endpoint_url=moto_endpoint, region_name="eu-west-1",
                          aws_access_key_id="rehearsal", aws_secret_access_key="rehearsal")
    found = set()
    for page in client.get_paginator("list_metrics").paginate(Namespace=namespace):
        for metric in page["Metrics"]:
            found.add((metric["MetricName"], frozenset((d["Name"], d["Value"]) for d in metric["Dimensions"])))
    return found


def rehearse_environment(assembly: Assembly, *, lines: Mapping[str, SparkLine], workdir: Path,
                         moto_endpoint: str, records: int = 600, files: int = 3,
                         kill_after_batches: int | None = None, timeout: float = 600,
                         observe_source_reads: bool = False) -> EnvironmentResult:
    """Every job of the environment on the Spark line of its Glue version (`lines`: Glue version -> line)."""
    s3 = LocalS3(workdir / "s3")
    result = EnvironmentResult(assembly.environment)
    jobs = assembly.glue_jobs()
    for seed, job in enumerate((j for j in jobs if j.command == "gluestreaming"), start=11):
        line = _line(lines, job)
        source = rehearse_streaming_job(assembly, job, line=line, workdir=workdir, s3=s3, moto_endpoint=moto_endpoint,
                                        records=records, files=files, seed=seed,
                                        kill_after_batches=kill_after_batches, timeout=timeout,
                                        observe_source_reads=observe_source_reads)
        result.sources[source.source] = source
    for job in (j for j in jobs if j.command == "glueetl"):
        run = run_job(job, line=_line(lines, job), workdir=workdir, s3=s3,
                      moto_endpoint=moto_endpoint, timeout=timeout)
        if run.returncode != 0:
            raise RehearsalError(f"{job.logical_id} failed (exit {run.returncode}):\n{run.stderr[-4000:]}")
        result.compaction = run
    namespace = next(iter({j.arguments["--metrics_namespace"] for j in jobs}))
    result.metrics = received_metrics(moto_endpoint, namespace)
    result.alarm_metrics = alarm_metrics(assembly, namespace)
    return result


def _line(lines: Mapping[str, SparkLine], job: GlueJob) -> SparkLine:
    if job.glue_version not in lines:
        from infra.runtimes import RUNTIMES

        runtime = RUNTIMES.get(job.glue_version)
        why = (f"AWS's awsglue package for Glue {job.glue_version} needs Python {runtime.python}, which this machine "
               "cannot install (its job code runs in the Spark tests only)") if runtime and not runtime.rehearsable else \
            "no Spark line given for it"
        raise RehearsalError(f"{job.logical_id} runs on Glue {job.glue_version}: {why} (rehearsable: {sorted(lines)})")
    return lines[job.glue_version]
