"""What a rehearsal must show, as a list of problems (empty: the environment rehearsed clean)."""

from __future__ import annotations

import calendar
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rehearsal.run import LocalS3
from rehearsal.scenario import ROUTED_UNROUTABLE_PART, EnvironmentResult, HeldInput, committed_stats


def problems(result: EnvironmentResult, spark, s3: LocalS3) -> list[str]:
    """Every problem of the rehearsed environment: each source's (source_problems), compaction's, the keeper's and
    the alarmed metrics'."""
    return source_problems(result.sources, spark, s3, result.iceberg_catalog) + _environment_problems(result, s3)


def source_problems(sources: dict, spark, s3: LocalS3, iceberg_catalog: Path | None = None) -> list[str]:
    """Each source's: its records committed and reconciled, every valid event in its dataset's table exactly once,
    every bad record one of its dead letters, Job.init called, JSON proven by the jar (`sources`: name -> SourceResult).
    A routed source's records are checked per part (`<source>/<dataset>` and `<source>/unroutable`), each part's
    commit markers, lake and dead letters as a source of that one dataset's."""
    from pyspark.sql import functions as F

    from glue_jobs.lake.lake_table import LakeTable

    found = []
    # {lake path: (its dataset, its Iceberg table or None)}: each source's rows are read from its dataset's table,
    # ids by the dataset's key; a Parquet lake with Spark, an Iceberg table with pyiceberg
    parts = {name: parts_of(source, s3) for name, source in sources.items()}
    lake_tables = {part.lake_path: (part.dataset, iceberg_table(sources[name].arguments))
                   for name, each in parts.items() for part in each if part.lake_path}
    lake_ids: Counter = Counter()  # (source, dataset, key)
    for path, (dataset, iceberg) in lake_tables.items():
        table = LakeTable.of(dataset)
        if iceberg is not None:
            rows, tags = iceberg_rows(iceberg_catalog, iceberg, table.key)
            lake_ids.update((src, dataset, key) for src, key in rows)
            if len(tags) != len(set(tags)):
                found.append(f"{dataset}: a batch tag on more than one Iceberg snapshot: {sorted(tags)}")
            continue
        lake = spark.read.schema(table.spark_schema()).parquet(s3.path(path))
        key = F.concat_ws("|", *(F.col(f"`{name}`").cast("string") for name in table.key)).alias("key")
        lake_ids.update((r.source, dataset, r.key) for r in lake.select("source", key).collect())
    for name, source in sources.items():
        held, committed = source.held, source.committed
        if committed["records_in"] != held.records:
            found.append(f"{name}: {committed['records_in']} records committed, {held.records} held")
        for part in parts[name]:
            found += _part_problems(part, lake_ids, spark, s3)
        for run in source.runs:
            if not run.events("job_init"):
                found.append(f"{name}: the streaming job never called Job.init")
        # JSON records were proven by the JVM function of the job's --extra-jars, not by the Spark expressions that
        # stand in without it (glue_jobs/contract/strict_json.py logs which way it took).
        if source.arguments["--source_type"] == "kinesis":
            from glue_jobs.contract.strict_json import STRICT_JSON_CLASS

            if not any(f"proving JSON records with {STRICT_JSON_CLASS}:" in run.stderr for run in source.runs):
                found.append(f"{name}: JSON records were not proven with {STRICT_JSON_CLASS} (is the jar in its --extra-jars?)")
    return found


@dataclass
class Part:
    """What one dataset of a source (or a routed source's unroutable records, `dataset` None) must hold."""

    label: str
    source: str
    dataset: str | None
    lake_path: str | None
    dead_letter_path: str
    held: HeldInput
    committed: dict


def parts_of(source, s3: LocalS3) -> list[Part]:
    """A source's parts: the source itself, or each dataset of a routed source and its unroutable records (the
    folders glue_jobs/job_arguments.py ROUTED_KEYS names)."""
    arguments, name = source.arguments, source.source
    if "--route_field" not in arguments:
        return [Part(name, name, arguments["--dataset"], arguments["--lake_path"], arguments["--dead_letter_path"],
                     source.held, source.committed)]
    dead = arguments["--dead_letter_path"].rstrip("/")
    parts = [Part(f"{name}/{d}", name, d, arguments[f"--lake_path.{d}"], f"{dead}/{d}", source.held.parts[d],
                  committed_stats(s3, arguments, d)) for d in arguments["--datasets"].split(",")]
    unroutable = HeldInput(source.held.folder, len(source.held.bad_payloads), [], source.held.bad_payloads, 0)
    return [*parts, Part(f"{name}/unroutable", name, None, None, f"{dead}/unroutable", unroutable,
                         committed_stats(s3, arguments, ROUTED_UNROUTABLE_PART))]


def _part_problems(part: Part, lake_ids: Counter, spark, s3: LocalS3) -> list[str]:
    from glue_jobs.schema import spark_dead_letter_schema

    found, held, committed, name = [], part.held, part.committed, part.label
    if name != part.source and committed["records_in"] != held.records:  # a routed part (its source's total: above)
        found.append(f"{name}: {committed['records_in']} records committed, {held.records} held")
    if committed["records_in"] != committed["records_written"] + committed["dead_letters"] + committed["duplicates_collapsed"]:
        found.append(f"{name}: counts do not reconcile: {committed}")
    written = Counter({key: n for (src, dataset, key), n in lake_ids.items() if src == part.source and dataset == part.dataset})
    twice = sorted(event_id for event_id, n in written.items() if n > 1)
    if twice:
        found.append(f"{name}: {len(twice)} event(s) in the lake more than once, e.g. {twice[:3]}")
    if set(written) != set(held.valid_event_ids):
        missing = set(held.valid_event_ids) - set(written)
        extra = set(written) - set(held.valid_event_ids)
        found.append(f"{name}: lake holds {len(written)} ids; {len(missing)} valid id(s) missing, {len(extra)} unexpected")
    dead_path = Path(s3.path(part.dead_letter_path))
    payloads, reasons = [], set()
    if dead_path.exists():
        dead = spark.read.schema(spark_dead_letter_schema()).parquet(str(dead_path))
        rows = dead.select("payload", "reason").collect()
        payloads, reasons = [r.payload for r in rows], {r.reason for r in rows}
    # What no route takes is `unroutable` (glue_jobs/routed_batch.py), but a value its source could not read at all
    # (a Kafka value that is no frame) keeps the adapter's malformed_record
    if part.dataset is None and reasons - {"unroutable", "malformed_record"}:
        found.append(f"{name}: dead letters with reason(s) {sorted(reasons - {'unroutable', 'malformed_record'})}, "
                     "not unroutable")
    if sorted(payloads) != sorted(held.bad_payloads):
        found.append(f"{name}: {len(payloads)} dead letter(s), {len(held.bad_payloads)} bad record(s) held "
                     f"(payloads differ: {sorted(set(payloads) ^ set(held.bad_payloads))[:2]})")
    return found


def _environment_problems(result: EnvironmentResult, s3: LocalS3) -> list[str]:
    found = []
    lake_paths = {part.lake_path for source in result.sources.values() if iceberg_table(source.arguments) is None
                  for part in parts_of(source, s3) if part.lake_path}
    if result.compaction is not None:
        events = [e["event"] for e in result.compaction.report]
        if events[:1] != ["job_init"] or events[-1:] != ["job_commit"]:
            found.append(f"compaction: Job.init first and job.commit last expected, got {events}")
        # The per-source checks above already read the lake after compaction (every valid event exactly once),
        # so what is left to show is that it compacted: each hour well inside its lookback holds one file.
        crowded = crowded_hours(result.compaction.job.arguments, s3, lake_paths)
        if crowded:
            found.append(f"compaction left {len(crowded)} hour(s) of its lookback with more than one file, e.g. {crowded[:3]}")
        # It deleted the inputs with the JVM bulk delete of the --extra-jars jar, not one py4j call per file.
        from glue_jobs.lake.storage import BULK_DELETE_CLASS

        if f"deleting files with {BULK_DELETE_CLASS}:" not in result.compaction.stderr:
            found.append(f"compaction did not delete its inputs with {BULK_DELETE_CLASS} (is the jar in its --extra-jars?)")
        # Each dataset's size, published per dataset after the run (compaction/glue_entry.publish_lake_sizes): the
        # lake dashboard's per-dataset figures.
        import json

        arguments = result.compaction.job.arguments
        datasets = set(json.loads(arguments["--lake_tables"])) | set(json.loads(arguments.get("--iceberg_tables") or "{}"))
        sized = {dict(dims).get("Dataset") for name, dims in result.metrics if name == "LakeBytes"}
        if datasets - sized:
            found.append(f"compaction published no LakeBytes for {sorted(datasets - sized)}")
    jobs = {run.job.logical_id for source in result.sources.values() for run in source.runs}
    if len(result.keeper) != len(jobs) or set(result.keeper.values()) != {"running"}:
        found.append(f"the job keeper's check did not start every streaming job: {result.keeper}")
    missing_metrics = result.alarm_metrics - result.metrics
    if missing_metrics:
        found.append(f"alarmed metrics no job published: {sorted((n, sorted(d)) for n, d in missing_metrics)}")
    return found


def iceberg_table(arguments: dict) -> tuple[str, str] | None:
    """(namespace, table) of an Iceberg dataset's job (its --catalog_database and --lake_table), or None."""
    return (arguments["--catalog_database"], arguments["--lake_table"]) if "--lake_table" in arguments else None


def iceberg_rows(catalog_file: Path | None, iceberg: tuple[str, str], key: tuple[str, ...]) -> tuple[list, list[str]]:
    """[(source, key)] of the table's rows and the batch tags of its snapshots, read by pyiceberg (a reader the
    project did not write) from the stood-in catalog the jobs committed to (rehearsal/standin_iceberg/)."""
    from devtools.iceberg_demo import local_catalog
    from glue_jobs.lake.iceberg_lake import BATCH_PROPERTY
    from glue_jobs.session import GLUE_ICEBERG_CATALOG

    if catalog_file is None:
        raise RuntimeError("an Iceberg dataset was rehearsed without a stood-in catalog")
    table = local_catalog(catalog_file.parent, GLUE_ICEBERG_CATALOG).load_table(".".join(iceberg))
    arrow = table.scan(selected_fields=("source", *key)).to_arrow()
    keys = ["|".join(map(str, parts)) for parts in zip(*(arrow.column(k).to_pylist() for k in key), strict=True)]
    tags = [t for s in table.snapshots() if (t := s.summary.additional_properties.get(BATCH_PROPERTY))]
    return list(zip(arrow.column("source").to_pylist(), keys, strict=True)), tags


def crowded_hours(arguments: dict, s3: LocalS3, lake_paths: set[str], margin_hours: int = 2) -> list[str]:
    """Hour partitions inside the compaction job's lookback (less a margin at both ends for the time the
    rehearsal took) that still hold more than one visible Parquet file."""
    hour_ms = 3_600_000
    now = int(time.time() * 1000)
    lookback = int(arguments["--lookback_hours"])
    newest = now - (int(arguments["--grace_minutes"]) * 60_000) - hour_ms - margin_hours * hour_ms
    oldest = now - (lookback - margin_hours) * hour_ms
    crowded = []
    for lake in lake_paths:
        for hour_dir in Path(s3.path(lake)).glob("event_date=*/event_hour=*"):
            day, hour = hour_dir.parent.name.split("=")[1], int(hour_dir.name.split("=")[1])
            start = calendar.timegm(time.strptime(day, "%Y-%m-%d")) * 1000 + hour * hour_ms
            files = [f for f in hour_dir.glob("*.parquet") if not f.name.startswith(("_", "."))]
            if oldest <= start <= newest and len(files) > 1:
                crowded.append(f"{hour_dir.parent.name}/{hour_dir.name}: {len(files)} files")
    return sorted(crowded)

