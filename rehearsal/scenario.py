"""An environment's rehearsal: every streaming job fed held input, then compaction, then the checks.

- Kinesis jobs get NDJSON lines (glue_jobs.generate: valid events, bad records of every kind,
  duplicates); Kafka jobs read a real broker on loopback (Kafka's own, devtools/kafka_broker.py) holding
  Schema Registry frames made by the project's producer with the version UUIDs of a registry on the moto
  server (the template's schema versions registered there first): valid records (some zlib-compressed),
  out-of-range times, duplicates, and frames that do not decode (docs/kafka.md "Dead letters").
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

from rehearsal.assembly import REGION, Assembly, GlueJob, JobSource, RehearsalError
from rehearsal.run import JobRun, LocalS3, iceberg_catalog_file, run_job
from rehearsal.runtime import SparkLine

HOUR_MS = 3_600_000
# Every held event lies in a closed hour inside compaction's default lookback (48 h).
HELD_EVENTS_END_HOURS_AGO = 1
STATE_DIR = "_streamlake"  # glue_jobs.commit.STATE_DIR: where the commit markers are
ROUTES_DIR, ROUTED_UNROUTABLE_PART = "_routes", "_unroutable"  # glue_jobs.routed_batch: a routed source's marker folders


@dataclass
class HeldInput:
    folder: Path
    records: int
    valid_event_ids: list[str]
    bad_payloads: list[str]  # the dead letters' payloads, as the job must keep them (a routed source: its unroutable ones)
    duplicates: int
    parts: dict[str, HeldInput] = field(default_factory=dict)  # a routed source's: each dataset's share of the records


@dataclass
class SourceResult:
    source: str
    held: HeldInput
    arguments: dict[str, str]  # what the source runs with (rehearsal.assembly.JobSource.arguments)
    runs: list[JobRun] = field(default_factory=list)
    committed: dict = field(default_factory=dict)  # summed BatchStats of the commit markers


@dataclass
class EnvironmentResult:
    environment: str
    sources: dict[str, SourceResult] = field(default_factory=dict)
    compaction: JobRun | None = None
    metrics: set[tuple[str, frozenset]] = field(default_factory=set)  # (name, {(dimension, value)})
    alarm_metrics: set[tuple[str, frozenset]] = field(default_factory=set)
    keeper: dict[str, str] = field(default_factory=dict)  # job name -> the job keeper's state after one check
    iceberg_catalog: Path | None = None  # the stood-in Iceberg catalog's file, when a job has --datalake-formats iceberg


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


def routed_input(folder: Path, *, field_path: str, routes: dict[str, str], records: int, files: int, seed: int) -> HeldInput:
    """NDJSON lines mixing the route's datasets (glue_jobs.generate_command.generate_routed), with records of a value no
    route names, in the closed hours before _end_ms."""
    from datetime import datetime, timezone

    from glue_jobs import datasets
    from glue_jobs.generate_command import generate_routed

    end = datetime.fromtimestamp(_end_ms() / 1000, timezone.utc)
    expect = generate_routed({name: datasets.load(name) for name in set(routes.values())}, field_path, routes, folder,
                             records=records, files=files, bad_ratio=0.05, unroutable_ratio=0.03, seed=seed, hours=24, end=end)
    parts = {name: HeldInput(folder, part.records, part.valid_keys, part.bad_payloads, part.duplicates)
             for name, part in expect.parts.items()}
    return HeldInput(folder, expect.records, [], expect.unroutable, sum(p.duplicates for p in parts.values()), parts)


def bad_frames(good: bytes) -> dict[str, tuple[bytes, str]]:
    """Values the Kafka job cannot decode, made from one good frame, with the reason each must get."""
    import uuid

    from glue_jobs.decoding.registry_frames import frame

    body = good[18:]
    return {
        "plain JSON": (b'{"not": "a frame"}', "malformed_record"),
        "Confluent frame": (b"\x00\x00\x00\x00\x01" + body, "malformed_record"),
        "truncated": (good[:12], "malformed_record"),
        "compression byte 7": (b"\x03\x07" + good[2:], "malformed_record"),
        "unknown UUID": (frame(uuid.UUID(int=0x5EED), body), "unknown_schema_version"),
        "Avro cut short": (good[:-2], "malformed_record"),
        "trailing bytes": (good + b"\x02\x04", "malformed_record"),
    }


def _registry(moto_endpoint: str):
    import boto3

    return boto3.client("glue", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="rehearsal",
                        aws_secret_access_key="rehearsal")


def register_versions(assembly: Assembly, registry: str, schema: str, moto_endpoint: str) -> str:
    """The registry as the deploy leaves it: the template's versions of `schema` registered, in order, on the moto
    server. Returns the newest version's UUID (what a producer frames with)."""
    return _register(_registry(moto_endpoint), registry, schema, assembly.registered_versions(registry, schema))


def _register(glue, registry: str, schema: str, definitions: list[str]) -> str:
    try:
        glue.create_registry(RegistryName=registry)
    except glue.exceptions.AlreadyExistsException:
        pass
    try:
        version_id = glue.create_schema(RegistryId={"RegistryName": registry}, SchemaName=schema, DataFormat="AVRO",
                                        Compatibility="BACKWARD", SchemaDefinition=definitions[0])["SchemaVersionId"]
    except glue.exceptions.AlreadyExistsException:
        return glue.get_schema_version(SchemaId={"RegistryName": registry, "SchemaName": schema},
                                       SchemaVersionNumber={"VersionNumber": len(definitions)})["SchemaVersionId"]
    for definition in definitions[1:]:
        version_id = glue.register_schema_version(SchemaId={"RegistryName": registry, "SchemaName": schema},
                                                  SchemaDefinition=definition)["SchemaVersionId"]
    return version_id


def kafka_frames_input(broker, topic: str, version_id: str, *, records: int, seed: int, dataset: str) -> HeldInput:
    """Frames on the topic (one partition per 200 records, at least 2): dataset_frames, then bad_frames (their dead
    letters hold their bytes as base64)."""
    import base64

    broker.create_topic(topic, max(2, records // 200))
    held, good = dataset_frames(broker, topic, version_id, records=records - 7, seed=seed, dataset=dataset)
    values = [value for value, _ in bad_frames(good).values()]
    produce_values(broker, topic, values)
    held.bad_payloads += [base64.b64encode(value).decode() for value in values]
    held.records += len(values)
    return held


def dataset_frames(broker, topic: str, version_id: str, *, records: int, seed: int, dataset: str,
                   first: int = 0) -> tuple[HeldInput, bytes]:
    """`records` frames of `dataset` on the topic, framed with `version_id`: the dataset generator's valid records
    (keys from record `first` on), every fourth zlib-compressed, one event time in 50 beyond max_future (a record the
    contract refuses: its dead letter holds the decoder's JSON rendering), and the first valid record sent twice (a
    producer retry). Returns the held input and one good frame."""
    import random
    from datetime import datetime, timezone

    from glue_jobs import datasets
    from glue_jobs.dataset_generate import RecordMaker, decimal_literal
    from glue_jobs.decoding.registry_frames import ZLIB
    from operations.kafka_producer import AvroFramer, send

    table = datasets.load(dataset)
    maker, rng = RecordMaker(table, seed), random.Random(seed)
    end = datetime.fromtimestamp(_end_ms() / 1000, timezone.utc)
    held = HeldInput(Path(topic), 0, [], [], 0)
    lines: list[tuple[str, str, bool]] = []  # (where, JSON text, zlib)
    for n in range(first, first + records - 1):
        record = maker.valid(n, datetime.fromtimestamp(end.timestamp() - rng.randint(1, 24 * 3600), timezone.utc))
        for name in table.json_text:  # an Avro string field: its JSON text
            if record.get(name) is not None:
                record[name] = json.dumps(record[name], separators=(",", ":"))
        if rng.random() < 0.02:
            record[table.event_time.field] = maker._event_time(datetime(2099, 1, 1, tzinfo=timezone.utc))
            held.bad_payloads.append(decoder_json(table.schema, record))
        else:
            held.valid_event_ids.append("|".join(str(record[k]) for k in table.key))
        lines.append((f"record {n}", decimal_literal(record), n % 4 == 3))
    lines.append(("retry", next(text for _, text, _ in lines if json.loads(text)[table.key[0]] == held.valid_event_ids[0]), False))
    held.duplicates += 1
    for compression in (0, ZLIB):
        chosen = [(where, text) for where, text, zlib in lines if zlib == (compression == ZLIB)]
        sent = send({"bootstrap.servers": broker.bootstrap_servers}, topic, chosen, AvroFramer(table, version_id, compression=compression))
        if sent.failed:
            raise RehearsalError(f"producing to the rehearsal broker failed: {sent.failed[:3]}")
    held.records = len(lines)
    return held, AvroFramer(table, version_id).frame(lines[0][1], "good")[1]


def produce_values(broker, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    if producer.flush(30):
        raise RehearsalError("producing raw values to the rehearsal broker failed")


# Of bad_frames, the values a routed topic cannot route (no frame, or an id the registry does not hold): the source's
# own dead letters. The others carry the id of the dataset whose good frame they were made from: its dead letters.
UNROUTABLE_BAD_FRAMES = ("plain JSON", "Confluent frame", "truncated", "unknown UUID")
UNBOUND_SCHEMA = "rehearsal.UnboundSchema"  # a schema of the registry no dataset on the topic is bound to


def routed_kafka_input(assembly: Assembly, source: JobSource, broker, moto_endpoint: str, *, records: int,
                       seed: int) -> HeldInput:
    """A routed topic's frames (docs/kafka.md "One topic, several datasets"): each dataset's share framed with the
    newest registered version of its own schema (dataset_frames, keys from 1,000,000 on, so a dataset another source
    also carries keeps distinct keys), 1 in 50 framed with a schema of the registry no dataset is bound to, and
    bad_frames made from the first dataset's good frame. Each dataset's part holds its share and the bad frames routed
    to it; the source's own (unroutable) dead letters, the rest."""
    import base64
    from datetime import datetime, timezone

    from glue_jobs import datasets
    from glue_jobs.dataset_generate import RecordMaker, decimal_literal
    from operations.kafka_producer import AvroFramer

    routes = json.loads(source.arguments["--routes"])  # {registry schema: dataset}
    registry, topic = source.arguments["--registry_name"], source.arguments["--topic"]
    broker.create_topic(topic, max(2, records // 200))
    unbound = max(2, records // 50)
    shares = _shares(records - unbound - len(bad_frames(b"")), len(routes))
    parts, good = {}, {}
    for i, (schema, dataset) in enumerate(sorted(routes.items(), key=lambda route: route[1])):
        version_id = register_versions(assembly, registry, schema, moto_endpoint)
        parts[dataset], good[dataset] = dataset_frames(broker, topic, version_id, records=shares[i], seed=seed + i,
                                                       dataset=dataset, first=1_000_000)
    first = min(good)
    table = datasets.load(first)
    unbound_id = _register(_registry(moto_endpoint), registry, UNBOUND_SCHEMA,
                           assembly.registered_versions(registry, next(s for s, d in routes.items() if d == first))[:1])
    framer, maker = AvroFramer(table, unbound_id, version=1), RecordMaker(table, seed + 99)
    unbound_values = [framer.frame(decimal_literal(maker.valid(2_000_000 + n, datetime.now(timezone.utc))), "unbound")[1]
                      for n in range(unbound)]
    bad = bad_frames(good[first])
    produce_values(broker, topic, unbound_values + [value for value, _ in bad.values()])
    unroutable = [base64.b64encode(v).decode() for v in unbound_values]
    for name, (value, _) in bad.items():
        (unroutable if name in UNROUTABLE_BAD_FRAMES else parts[first].bad_payloads).append(base64.b64encode(value).decode())
        if name not in UNROUTABLE_BAD_FRAMES:
            parts[first].records += 1
    return HeldInput(Path(topic), records, [], unroutable, sum(p.duplicates for p in parts.values()), parts)


def _shares(total: int, count: int) -> list[int]:
    return [total // count + (1 if i < total % count else 0) for i in range(count)]


def decoder_json(node, value) -> str:
    """The JSON the Kafka job's decoder renders for a decoded record (jvm/glue-functions RegistryFrameDecoder.render):
    every field in schema order (null ones as null), decimals with their scale's digits, map keys in the order
    written, strings escaped as JSON, non-ASCII kept."""
    from decimal import Decimal

    if value is None:
        return "null"
    if node.kind == "record":
        return "{" + ",".join(f"{json.dumps(f.name)}:{decoder_json(f.type, value.get(f.name))}" for f in node.fields) + "}"
    if node.kind == "array":
        return "[" + ",".join(decoder_json(node.items, v) for v in value) + "]"
    if node.kind == "map":
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{decoder_json(node.items, v)}" for k, v in value.items()) + "}"
    if node.kind == "decimal":
        return format(Decimal(str(value)).quantize(Decimal(1).scaleb(-node.scale)), "f")
    if node.kind in ("float", "double"):
        raise RehearsalError("the rehearsal does not reproduce Java's rendering of a float or double")
    return json.dumps(value, ensure_ascii=False)


def source_table(assembly: Assembly, job: JobSource, held: HeldInput) -> dict[str, dict]:
    """The stand-in's view of the source's table: parameters and columns as synthesized."""
    database, name = job.arguments["--catalog_database"], job.arguments["--source_table"]
    table = assembly.catalog_table(database, name)
    descriptor = table["StorageDescriptor"]
    parameters = {**table.get("Parameters", {}), **descriptor.get("Parameters", {})}
    columns = [[c["Name"], c["Type"]] for c in descriptor["Columns"]]
    return {f"{database}.{name}": {"parameters": parameters, "columns": columns, "input": str(held.folder)}}


def routed(job: JobSource | Mapping[str, str]) -> bool:
    return "--route_field" in getattr(job, "arguments", job)


def committed_stats(s3: LocalS3, job: JobSource | Mapping[str, str], part: str | None = None) -> dict:
    """The summed commit markers of the source (`job`: it or its arguments). A routed source's markers are in a folder
    per part under `<checkpoint>/_routes/` (glue_jobs/routed_batch.py): its dataset's or `_unroutable`; with `part`
    that part's, else every part's, `batches` then counting the batches every part committed."""
    arguments = getattr(job, "arguments", job)
    checkpoint = Path(s3.path(arguments["--checkpoint_path"]))
    if routed(arguments):
        parts = [part] if part else [*arguments["--datasets"].split(","), ROUTED_UNROUTABLE_PART]
        each = [_marker_totals(checkpoint / ROUTES_DIR / name / STATE_DIR) for name in parts]
        totals = {key: sum(t[key] for t in each) for key in each[0] if key != "ids"}
        totals["batches"] = len(set.intersection(*(t["ids"] for t in each)))
        return totals
    totals = _marker_totals(checkpoint / STATE_DIR)
    del totals["ids"]
    return totals


def _marker_totals(folder: Path) -> dict:
    totals = {"batches": 0, "records_in": 0, "records_written": 0, "dead_letters": 0, "duplicates_collapsed": 0, "ids": set()}
    for marker in folder.glob("batch-*.committed.json") if folder.exists() else ():
        try:
            stats = json.loads(marker.read_text(encoding="utf-8"))
        except ValueError:
            continue  # being written (a local file is visible before it is closed): not committed yet
        totals["batches"] += 1
        totals["ids"].add(marker.name)
        for key in ("records_in", "records_written", "dead_letters", "duplicates_collapsed"):
            totals[key] += stats[key]
    return totals


def hold_source(assembly: Assembly, source: JobSource, *, workdir: Path, records: int, files: int, seed: int,
                moto_endpoint: str | None = None, broker=None) -> tuple[HeldInput, dict[str, dict]]:
    """A source's records held for its job: a Kinesis source's files in a folder of the stand-in's source table, a Kafka
    source's frames produced to the local broker's topic, framed with the newest registered version. Returns the held
    input and the stand-in tables to add ({} for Kafka)."""
    name, dataset = source.name, source.arguments.get("--dataset")
    if routed(source) and source.arguments["--source_type"] == "kafka":
        if broker is None or moto_endpoint is None:
            raise RehearsalError(f"{source.logical_id} reads Kafka ({name}): the rehearsal needs its broker and the moto "
                                 "server's registry")
        return routed_kafka_input(assembly, source, broker, moto_endpoint, records=records, seed=seed), {}
    if routed(source):
        held = routed_input(workdir / "held" / name, field_path=source.arguments["--route_field"],
                            routes=json.loads(source.arguments["--routes"]), records=records, files=files, seed=seed)
        return held, source_table(assembly, source, held)
    if source.arguments["--source_type"] == "kinesis":
        held = kinesis_input(workdir / "held" / name, records=records, files=files, seed=seed, dataset=dataset)
        return held, source_table(assembly, source, held)
    if broker is None or moto_endpoint is None:
        raise RehearsalError(f"{source.logical_id} reads Kafka ({name}): the rehearsal needs its broker and the moto "
                             "server's registry")
    version_id = register_versions(assembly, source.arguments["--registry_name"], source.arguments["--schema_name"],
                                   moto_endpoint)
    return kafka_frames_input(broker, source.arguments["--topic"], version_id, records=records, seed=seed,
                              dataset=dataset), {}


def run_arguments_for(job: GlueJob, held: Mapping[str, HeldInput], *, files: int, broker=None) -> dict[str, str]:
    """The run arguments the rehearsal starts `job` with (as an operator passes them to StartJobRun): one-second windows
    instead of the deployed 60 s, so the held files (one per micro-batch) pass in seconds; for a Kafka source, in the
    run's `--sources` (which replaces the deployed one, as any argument), the local broker instead of the cluster's (a
    deploy-time lookup), no IAM auth (it has none), and about `files` offsets per micro-batch."""
    arguments = {"--window_size_seconds": "1"}
    deployed = json.loads(job.arguments["--sources"])
    overrides = [{"bootstrap_servers": broker.bootstrap_servers, "kafka_auth": "none",
                  "max_offsets_per_trigger": str(-(-held[s["source_name"]].records // files))}
                 if s["source_type"] == "kafka" else {} for s in deployed]
    if any(overrides):
        arguments["--sources"] = json.dumps([{**d, **o} for d, o in zip(deployed, overrides, strict=True)])
    return arguments


def rehearse_streaming_job(assembly: Assembly, job: GlueJob, *, line: SparkLine, workdir: Path, s3: LocalS3,
                           moto_endpoint: str | None, records: int, files: int, seed: int,
                           kill_after_batches: int | None = None, timeout: float = 600,
                           observe_source_reads: bool = False, broker=None) -> list[SourceResult]:
    """Every source of the job held (`records` each; the n-th source's seed is `seed` + 1000 n), then the job run as
    deployed until each source has committed all of its records; SIGKILLed first, once its sources have committed
    `kill_after_batches` batches between them, if given."""
    tables: dict[str, dict] = {}
    results, sources = [], job.sources
    for offset, source in enumerate(sources):
        held, source_tables = hold_source(assembly, source, workdir=workdir, records=records, files=files,
                                          seed=seed + 1000 * offset, moto_endpoint=moto_endpoint, broker=broker)
        tables |= source_tables
        results.append(SourceResult(source.name, held, source.arguments))
    run_arguments = run_arguments_for(job, {r.source: r.held for r in results}, files=files, broker=broker)

    def all_committed() -> bool:
        return all(committed_stats(s3, source)["records_in"] >= result.held.records
                   for source, result in zip(sources, results, strict=True))

    common = dict(line=line, workdir=workdir, s3=s3, tables=tables, run_arguments=run_arguments,
                  moto_endpoint=moto_endpoint, timeout=timeout, observe_source_reads=observe_source_reads)
    runs = []
    if kill_after_batches:
        def enough_batches() -> bool:
            return sum(committed_stats(s3, source)["batches"] for source in sources) >= kill_after_batches

        runs.append(run_job(job, kill_when=enough_batches, **common))
    runs.append(run_job(job, until=all_committed, **common))
    for run in runs:
        if not run.stopped:
            raise RehearsalError(f"{job.logical_id} ended on its own (exit {run.returncode}):\n{run.stderr[-4000:]}")
    for source, result in zip(sources, results, strict=True):
        result.runs = list(runs)
        result.committed = committed_stats(s3, source)
    return results


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
    import contextlib

    s3 = LocalS3(workdir / "s3")
    result = EnvironmentResult(assembly.environment)
    jobs = assembly.glue_jobs()
    if any(j.arguments.get("--datalake-formats") == "iceberg" for j in jobs):
        result.iceberg_catalog = iceberg_catalog_file(workdir)
    streaming = [j for j in jobs if j.command == "gluestreaming"]
    with contextlib.ExitStack() as stack:
        broker = None
        if any(source.arguments["--source_type"] == "kafka" for j in streaming for source in j.sources):
            from devtools.kafka_broker import KafkaBroker

            broker = stack.enter_context(KafkaBroker(workdir / "kafka"))  # stopped when the streaming jobs are done
        for seed, job in enumerate(streaming, start=11):
            for source in rehearse_streaming_job(assembly, job, line=_line(lines, job), workdir=workdir, s3=s3,
                                                 moto_endpoint=moto_endpoint, records=records, files=files,
                                                 seed=seed, kill_after_batches=kill_after_batches, timeout=timeout,
                                                 observe_source_reads=observe_source_reads, broker=broker):
                result.sources[source.source] = source
    for job in (j for j in jobs if j.command == "glueetl"):
        run = run_job(job, line=_line(lines, job), workdir=workdir, s3=s3,
                      moto_endpoint=moto_endpoint, timeout=timeout)
        if run.returncode != 0:
            raise RehearsalError(f"{job.logical_id} failed (exit {run.returncode}):\n{run.stderr[-4000:]}")
        result.compaction = run
    from rehearsal.keeper import rehearse_keeper

    result.keeper = rehearse_keeper(assembly, moto_endpoint)
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
