"""Glue streaming entrypoint: read arguments, build each source's frame, hand each micro-batch to its writer.

Kept thin on purpose: everything it calls is tested locally. awsglue is imported only inside main(),
so this module imports (and its argument contract is tested) without Glue.

Arguments (Glue passes DefaultArguments as `--name value`; getResolvedOptions takes names without `--`):
JOB_ARGUMENTS, the job's own (JOB_NAME is supplied by Glue itself), and `--sources`, a JSON list with one object per
source the job runs: SOURCE_KEYS, plus SOURCE_TYPE_KEYS[source_type], plus ICEBERG_KEYS for an Iceberg dataset. A job
runs one source or several (docs/streaming-job.md "One job, several sources"), each its own query with its own
checkpoint, lake, dead letters and batch ids (glue_jobs/sources/source_queries.py).
"""

from __future__ import annotations

import json
import logging
import sys

log = logging.getLogger("streamlake.glue_entry")
GLUE_SUPPLIED_ARGUMENTS = ("JOB_NAME",)
JOB_ARGUMENTS = (
    "JOB_NAME",
    "environment",
    "catalog_database",
    "window_size_seconds",
    "batch_max_retries",
    "metrics_namespace",
    "metrics_region",
    "sources",
)
SOURCE_KEYS = (
    "source_name",
    "source_type",
    "dataset",
    "dataset_digest",
    "lake_path",
    "dead_letter_path",
    "checkpoint_path",
    "starting_position",
)
SOURCE_TYPE_KEYS = {
    "kinesis": ("max_fetch_records_per_shard", "max_fetch_time_ms", "source_table", "min_partitions"),
    "kafka": ("max_offsets_per_trigger", "bootstrap_servers", "topic", "registry_name", "schema_name", "kafka_auth",
              "partitions", "min_partitions"),
}


# An Iceberg dataset's source: the Data Catalog table it commits to and the table's location (under the dataset's lake
# prefix). Glue adds Iceberg's jars with `--datalake-formats iceberg`. The environment decides a dataset's table format
# (config `table_formats` over dataset.json's `table_format`), so the job learns it from its arguments, not from the
# dataset files in its zip: the stack gives `lake_table` to an Iceberg dataset's source and to no other.
ICEBERG_KEYS = ("lake_table", "lake_table_location")
TABLE_FORMATS = ("parquet", "iceberg")


def job_arguments() -> tuple[str, ...]:
    """Every argument the entrypoint reads (the infra contract test and the rehearsal compare these)."""
    return JOB_ARGUMENTS


def source_keys(source_type: str, table_format: str = "parquet") -> tuple[str, ...]:
    """Every key of one source's object in `--sources`, for its type and table format."""
    if source_type not in SOURCE_TYPE_KEYS:
        raise ValueError(f"source_type {source_type!r} is not one of {sorted(SOURCE_TYPE_KEYS)}")
    if table_format not in TABLE_FORMATS:
        raise ValueError(f"table_format {table_format!r} is not one of {', '.join(TABLE_FORMATS)}")
    return SOURCE_KEYS + SOURCE_TYPE_KEYS[source_type] + (ICEBERG_KEYS if table_format == "iceberg" else ())


def resolve_arguments(argv: list[str]) -> dict[str, str]:
    from awsglue.utils import getResolvedOptions

    return getResolvedOptions(argv, list(JOB_ARGUMENTS))


def job_sources(args: dict[str, str]) -> list[dict[str, str]]:
    """Each source of `--sources` as one flat argument dict (the job's arguments, `sources` left out, with the
    source's keys), in the order given. Refuses what the stack would never write, naming the source and the key: not a
    JSON list of objects, none, a key missing or unknown for the source's type, a value that is not a string, two
    sources of one name, checkpoint or dead-letter location (two queries on one checkpoint corrupt it)."""
    try:
        sources = json.loads(args["sources"])
    except ValueError as e:
        raise ValueError(f"--sources is not JSON: {e}") from None
    if not isinstance(sources, list) or not sources or not all(isinstance(s, dict) for s in sources):
        raise ValueError("--sources must be a JSON list of at least one object (one per source the job runs)")
    flat, seen = [], {"source_name": {}, "checkpoint_path": {}, "dead_letter_path": {}}
    job = {name: value for name, value in args.items() if name != "sources"}
    for index, source in enumerate(sources):
        label = f"--sources[{index}] ({source.get('source_name', 'unnamed')})"
        table_format = "iceberg" if ICEBERG_KEYS[0] in source else "parquet"
        if source.get("source_type") not in SOURCE_TYPE_KEYS:
            raise ValueError(f"{label}: source_type {source.get('source_type')!r} is not one of {sorted(SOURCE_TYPE_KEYS)}")
        expected = set(source_keys(source["source_type"], table_format))
        missing, unknown = sorted(expected - set(source)), sorted(set(source) - expected)
        if missing or unknown:
            raise ValueError(f"{label}: " + "; ".join(
                part for part in (f"missing key(s) {missing}" if missing else "", f"unknown key(s) {unknown}" if unknown else "") if part))
        not_text = sorted(key for key, value in source.items() if not isinstance(value, str))
        if not_text:
            raise ValueError(f"{label}: value(s) of {not_text} must be strings, as job arguments are")
        for key, owners in seen.items():
            if source[key] in owners:
                raise ValueError(f"{label}: {key} {source[key]!r} is also --sources[{owners[source[key]]}]'s")
            owners[source[key]] = index
        flat.append({**job, **source})
    return flat


def source_options(args: dict[str, str]) -> dict[str, str]:
    """additional_options for create_data_frame.from_catalog of a Kinesis source: the catalog table gives the
    stream and the classification; these are the Kinesis connection options of the Glue documentation
    (docs/streaming-job.md "Sources"): addRecordTimestamp (the arrival time column `__src_timestamp`),
    emitConsumerLagMetrics (glue.driver.streaming.maxConsumerLagInMs, which the consumer-lag alarm watches) and
    inferSchema=true, so the frame keeps each record's text (with false Glue parses it into the table's columns,
    and dead letters could not keep the original payload). Kafka sources read with Spark's Kafka source instead
    (kafka_reader_options)."""
    if args["source_type"] != "kinesis":
        raise ValueError(f"source_options is for Kinesis sources, not {args['source_type']!r}")
    return {"addRecordTimestamp": "true", "emitConsumerLagMetrics": "true", "inferSchema": "true",
            "startingPosition": args["starting_position"],
            "maxFetchRecordsPerShard": args["max_fetch_records_per_shard"], "maxFetchTimeInMs": args["max_fetch_time_ms"]}


def kafka_reader_options(args: dict[str, str]) -> dict[str, str]:
    """Spark's Kafka source options of a Kafka job (glue_jobs/kafka_job.reader_options): the cluster's IAM bootstrap
    brokers and the topic from the stack, IAM auth (aws-msk-iam-auth) on 9098. `kafka_auth` is "iam" in every
    deployed job; "none" is for a local broker (the deploy rehearsal passes it as a run argument): MSK's port 9098
    accepts IAM-authenticated TLS clients only, so "none" cannot reach a cluster."""
    from glue_jobs.kafka_job import reader_options

    if args["kafka_auth"] not in ("iam", "none"):
        raise ValueError(f"kafka_auth {args['kafka_auth']!r} is not 'iam' or 'none'")
    return reader_options(bootstrap_servers=args["bootstrap_servers"], topic=args["topic"],
                          partitions=_partitions(args["partitions"]), starting_offsets=args["starting_position"],
                          max_offsets_per_trigger=int(args["max_offsets_per_trigger"]),
                          min_partitions=None if args["min_partitions"] == "none" else int(args["min_partitions"]),
                          iam_auth=args["kafka_auth"] == "iam")


def _partitions(text: str) -> list[int] | None:
    """`--partitions`: "all" (subscribe to the topic) or the job's partition group, "0,1,2" (assign)."""
    if text == "all":
        return None
    try:
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise ValueError(f"partitions {text!r} is not 'all' or a comma-separated list of partition numbers") from None


def for_each_batch_options(args: dict[str, str]) -> dict[str, str]:
    """GlueContext.forEachBatch options. persistDataFrame "false": AWS's forEachBatch otherwise persists the
    raw batch (MEMORY_AND_DISK) and counts it before calling the batch function, one more pass over every
    record, while the batch function caches its own validated rows in the one pass it makes; with "false"
    forEachBatch only asks take(1) to skip empty batches (awsglue/context.py). docs/streaming-job.md
    ("Reading the source once") has the measured passes and the cost on Kinesis."""
    return {
        "windowSize": f"{int(args['window_size_seconds'])} seconds",
        "checkpointLocation": args["checkpoint_path"],
        "batchMaxRetries": str(int(args["batch_max_retries"])),
        "persistDataFrame": "false",
    }


def dataset_table(args: dict[str, str]):
    """The dataset this source carries, from the job zip; refuses a zip whose dataset files differ from the
    ones the stack was synthesized with (their digest is a job argument, so a dataset.json change also
    shows in `make diff`)."""
    from glue_jobs.lake.lake_table import LakeTable

    table = LakeTable.of(args["dataset"])
    if table.dataset.digest != args["dataset_digest"]:
        raise ValueError(f"dataset {table.name}: the job zip's files have digest {table.dataset.digest}, the job "
                         f"arguments {args['dataset_digest']}: the script, zip and arguments are from different synths")
    return table


def iceberg_target(args: dict[str, str]):
    """Where an Iceberg dataset's rows go (glue_jobs/lake/iceberg_lake.py), or None for a Parquet dataset (a source given no
    `lake_table`: see ICEBERG_KEYS)."""
    if ICEBERG_KEYS[0] not in args:
        return None
    from glue_jobs.lake.iceberg_lake import IcebergTarget
    from glue_jobs.session import GLUE_ICEBERG_CATALOG

    return IcebergTarget(GLUE_ICEBERG_CATALOG, args["catalog_database"], args["lake_table"],
                         location=args["lake_table_location"])


def kafka_batches(spark, args: dict[str, str], writer, table):
    """A Kafka job's source frame (Spark's Kafka source) and batch function: the dataset's registry versions are
    loaded (and checked against the zip's schema files) before the first record is read."""

    import boto3

    from glue_jobs.decoding.registry_frames import FrameDecoding, RegistryVersions, function_name
    from glue_jobs.kafka_job import KafkaBatches

    registry = RegistryVersions(boto3.client("glue", region_name=args["metrics_region"]), registry_name=args["registry_name"],
                                schema_name=args["schema_name"], dataset=table.dataset)
    registry.load()
    decoding = FrameDecoding(spark, table.dataset, registry, name=function_name(args["source_name"]))
    raw = spark.readStream.format("kafka").options(**kafka_reader_options(args)).load()
    return raw, KafkaBatches(writer, decoding, args["source_name"])


def source_batches(glue_context, args: dict[str, str], table):
    """One source's frame and batch function (the frame is only defined here: its query starts in the source's thread)."""
    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.metrics import CloudWatchMetricsSink

    spark = glue_context.spark_session
    writer = MicroBatchWriter(
        spark,
        source_name=args["source_name"],
        lake_path=args["lake_path"],
        dead_letter_path=args["dead_letter_path"],
        checkpoint_path=args["checkpoint_path"],
        metrics=CloudWatchMetricsSink(environment=args["environment"], namespace=args["metrics_namespace"],
                                      region=args["metrics_region"]),
        dataset=table.dataset,
        count_replacements=args["source_type"] == "kinesis",  # Glue decodes Kinesis records to text before the job
        iceberg=iceberg_target(args),
    )
    if args["source_type"] == "kafka":
        return kafka_batches(spark, args, writer, table)
    from glue_jobs.sources import from_kinesis, spread

    raw = glue_context.create_data_frame.from_catalog(
        database=args["catalog_database"],
        table_name=args["source_table"],
        transformation_ctx=f"source_{args['source_name']}",
        additional_options=source_options(args),
    )

    def process_batch(frame, batch_id) -> None:
        notes: list[str] = []  # frame anomalies the adapter worked around: logged, counted in the batch's metrics
        envelope = from_kinesis(spread(frame, int(args["min_partitions"])), args["source_name"], notes)
        for note in notes:
            log.warning("batch %s of %s: Kinesis frame: %s", batch_id, args["source_name"], note)
        writer(envelope, batch_id, frame_anomalies=len(notes))

    return raw, process_batch


def main(argv: list[str] | None = None) -> None:
    from functools import partial

    from awsglue.context import GlueContext
    from awsglue.job import Job
    from pyspark.context import SparkContext

    from glue_jobs.session import glue_iceberg_settings, job_spark_conf
    from glue_jobs.sources.source_queries import FAIR_SCHEDULING, run_sources

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    args = resolve_arguments(sys.argv if argv is None else argv)
    sources = job_sources(args)
    tables = {source["source_name"]: dataset_table(source) for source in sources}  # every zip check before any start
    # The script creates the job's SparkContext, so the job's static settings go in here; Glue's `--conf`
    # job argument is reserved ("Internal to AWS Glue. Do not set"). An Iceberg dataset's catalog settings too:
    # "Alternatively, you can set the following configuration using SparkConf in your script" (Glue, "Using the
    # Iceberg framework in AWS Glue"). One catalog serves every Iceberg source of the job: each table is created with
    # its own location (glue_jobs/lake/iceberg_lake.py), so the warehouse, the first one's, places none of them.
    conf = job_spark_conf().setAll(list(FAIR_SCHEDULING.items()))
    iceberg = next((source for source in sources if ICEBERG_KEYS[0] in source), None)
    if iceberg is not None:
        conf.setAll(list(glue_iceberg_settings(iceberg["lake_table_location"]).items()))
    glue_context = GlueContext(SparkContext.getOrCreate(conf))
    job = Job(glue_context)
    job.init(args["JOB_NAME"], args)

    starts = {}
    for source in sources:
        raw, process_batch = source_batches(glue_context, source, tables[source["source_name"]])
        starts[source["source_name"]] = partial(glue_context.forEachBatch, frame=raw, batch_function=process_batch,
                                                options=for_each_batch_options(source))
    run_sources(glue_context.spark_session.sparkContext, starts)
    job.commit()


if __name__ == "__main__":
    main()
