"""Glue entrypoint of the hourly compaction job (glueetl). Thin: parse arguments, run, publish metrics.

Job arguments (infra/compaction_job.py sets the required ones as default arguments):
    --lake_tables        JSON {dataset: s3://bucket/prefix}: every dataset's lake table, each compacted in turn
    --environment        dimension value of the StreamLake metrics
    --target_file_mb     target size of a compacted file
    --grace_minutes      an hour is closed this long after it ends
    --lookback_hours     with --scan true: how many hours back the window reaches
    --metrics_namespace  CloudWatch namespace (StreamLake)
    --metrics_region     the region to publish metrics in (the stack's region)
    --hour               optional, YYYY-MM-DDTHH: compact only that hour (a manual re-run)
    --scan               optional, true: every hour of the lookback window instead of the partitions log
                         (the default: the closed partitions the streaming jobs recorded, of any age)
    --iceberg_tables     JSON {dataset: {"table": "<database>.<table>", "location": "s3://..."}}: the Iceberg datasets'
                         tables, maintained instead of compacted (compaction/iceberg_maintenance.py); {} for none
    --iceberg_snapshot_retention_hours  their snapshots are kept this long (config)

The script starts like Glue's own script template: a GlueContext over the job's SparkContext, then
`Job.init(JOB_NAME, args)` and `job.commit()` at the end. AWS: "Ensure that the AWS Glue job includes the
following code for the security setting to take effect: job = Job(glueContext) / job.init(args['JOB_NAME'],
args)" (https://docs.aws.amazon.com/glue/latest/dg/encryption-security-configuration.html); the job has a
security configuration (S3, CloudWatch Logs and bookmark encryption).

The lake table uses partition projection, so no catalog partition is added or changed: compaction only
replaces files inside existing event_date/event_hour folders.
"""

from __future__ import annotations

import sys

JOB_ARGUMENTS = ("JOB_NAME", "lake_tables", "environment", "target_file_mb", "grace_minutes", "lookback_hours", "metrics_namespace",
                 "metrics_region", "iceberg_tables", "iceberg_snapshot_retention_hours")
OPTIONAL_JOB_ARGUMENTS = ("hour", "scan")  # --scan true: the lookback window instead of the partitions log


def job_arguments() -> tuple[str, ...]:
    """Every argument the entrypoint may read (the deploy rehearsal refuses any other of ours)."""
    return JOB_ARGUMENTS + OPTIONAL_JOB_ARGUMENTS


def settings_from_arguments(args: dict):
    """CompactionSettings from resolved job arguments; ValueError naming the argument when one is bad."""
    from compaction.layout import parse_hour
    from compaction.settings import MB, CompactionSettings

    def number(name: str, kind=int, minimum=0):
        try:
            value = kind(args[name])
        except (TypeError, ValueError):
            raise ValueError(f"--{name}: {args[name]!r} is not a {'number' if kind is float else 'whole number'}") from None
        if value < minimum:
            raise ValueError(f"--{name}: {value} must be at least {minimum}")
        return value

    hour = args.get("hour")
    scan = args.get("scan", "false")
    if scan not in ("true", "false"):
        raise ValueError(f"--scan: {scan!r} is not true or false")
    return CompactionSettings(
        lake_path="",  # one run per lake table: lake_tables()
        target_file_bytes=int(number("target_file_mb", float, 1) * MB),
        grace_minutes=number("grace_minutes"),
        lookback_hours=number("lookback_hours", minimum=1),
        hour=parse_hour(hour) if hour else None,
        scan=scan == "true",
        environment=args["environment"],
    )


def lake_tables(args: dict) -> dict[str, str]:
    """--lake_tables: a JSON object {dataset: lake path} of every Parquet dataset table the run compacts, in order
    (empty only when the environment's datasets are all Iceberg)."""
    import json

    try:
        tables = json.loads(args["lake_tables"])
    except ValueError:
        tables = None
    if not isinstance(tables, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in tables.items()):
        raise ValueError(f"--lake_tables: {args['lake_tables']!r} is not a JSON object of dataset name -> lake path")
    if not tables and not iceberg_tables(args):
        raise ValueError("--lake_tables and --iceberg_tables are both empty: the run has no table to work on")
    return tables


def iceberg_tables(args: dict) -> dict[str, tuple[str, str, str]]:
    """--iceberg_tables: {dataset: (database, table, location)} of the Iceberg datasets (none: {})."""
    import json

    text = args.get("iceberg_tables", "{}")
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    shaped = isinstance(raw, dict) and all(
        isinstance(v, dict) and isinstance(v.get("table"), str) and v["table"].count(".") == 1
        and isinstance(v.get("location"), str) and v["location"] for v in raw.values())
    if not shaped:
        raise ValueError(f"--iceberg_tables: {text!r} is not a JSON object of dataset name -> "
                         '{"table": "<database>.<table>", "location": "s3://..."}')
    return {name: (*v["table"].split("."), v["location"]) for name, v in raw.items()}


def maintain_iceberg_tables(spark, args: dict, tables: dict[str, tuple[str, str, str]]) -> list[str]:
    """Maintain each Iceberg dataset's table (compaction/iceberg_maintenance.py); the failures, one per table."""
    import logging

    from compaction.iceberg_maintenance import MaintenanceSettings, maintain
    from glue_jobs.lake.iceberg_lake import IcebergTarget
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.session import GLUE_ICEBERG_CATALOG

    settings = MaintenanceSettings(target_file_mb=max(1, round(float(args["target_file_mb"]))),
                                   snapshot_retention_hours=int(args["iceberg_snapshot_retention_hours"]))
    failed = []
    for dataset, (database, table, location) in tables.items():
        try:
            result = maintain(spark, IcebergTarget(GLUE_ICEBERG_CATALOG, database, table, location=location), settings,
                              lake_table=LakeTable.of(dataset))
            logging.getLogger("compaction").info("%s: %s", dataset, result.render())
        except Exception as error:  # one table's failure must not keep the others from their run
            logging.getLogger("compaction").exception("%s: Iceberg maintenance failed", dataset)
            failed.append(f"{dataset} maintenance ({error})")
    return failed


def resolve_arguments(argv: list[str]) -> dict:
    from awsglue.utils import getResolvedOptions

    names = list(JOB_ARGUMENTS) + [name for name in OPTIONAL_JOB_ARGUMENTS if f"--{name}" in argv]
    return getResolvedOptions(argv, names)


def publish_lake_sizes(spark, sink, lakes: dict[str, str]) -> None:
    """Each dataset's LakeBytes and LakeFiles (compaction/metrics.py), after the run: one recursive listing per dataset
    (a few LIST requests: compacted hours hold few files). Never fails the run."""
    import logging

    from compaction.metrics import LAKE_BYTES, LAKE_FILES, Metric
    from glue_jobs.lake.storage import HadoopStorage

    storage = HadoopStorage(spark)
    for dataset, path in sorted(lakes.items()):
        try:
            size, files = storage.size(path) if storage.exists(path) else (0, 0)
            sink.publish([Metric(LAKE_BYTES, size, "Bytes", dataset), Metric(LAKE_FILES, files, "Count", dataset)])
        except Exception:  # noqa: BLE001 - a metric must not fail a compaction that succeeded
            logging.getLogger("compaction").exception("%s: could not publish the lake's size", dataset)


def main(argv: list[str] | None = None) -> None:
    import logging

    from awsglue.context import GlueContext
    from awsglue.job import Job
    from pyspark.context import SparkContext

    from compaction.job import Compactor
    from compaction.metrics import CloudWatchMetricSink
    from glue_jobs.session import glue_iceberg_settings, job_spark_conf

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = resolve_arguments(sys.argv if argv is None else argv)
    settings, tables, icebergs = settings_from_arguments(args), lake_tables(args), iceberg_tables(args)
    conf = job_spark_conf()
    if icebergs:
        # As the streaming job does (glue_jobs/glue_entry.py): Glue's Iceberg settings through SparkConf.
        conf.setAll(list(glue_iceberg_settings(next(iter(icebergs.values()))[2]).items()))
    glue_context = GlueContext(SparkContext.getOrCreate(conf))
    job = Job(glue_context)
    job.init(args["JOB_NAME"], args)
    sink = CloudWatchMetricSink(settings.environment, namespace=args["metrics_namespace"], region=args["metrics_region"])
    import dataclasses

    failed = []
    # Each dataset's table is compacted by its own Compactor (its journal, partitions log and key); one
    # failing table does not keep the others from being compacted, and fails the run at the end.
    for dataset, lake_path in tables.items():
        table_settings = dataclasses.replace(settings, lake_path=lake_path, dataset=dataset)
        summary = Compactor(glue_context.spark_session, table_settings, sink=sink).run()
        for result in summary.results:
            logging.getLogger("compaction").info("%s: %s", dataset, result)
        failed += [f"{dataset} {r.partition} ({r.error})" for r in summary.of("failed")]
    failed += maintain_iceberg_tables(glue_context.spark_session, args, icebergs)
    publish_lake_sizes(glue_context.spark_session, sink, {**tables, **{d: t[2] for d, t in icebergs.items()}})
    if failed:
        raise RuntimeError(f"compaction failed for {', '.join(failed)}; the next run recovers from the journal")
    job.commit()


if __name__ == "__main__":
    main()
