"""Glue streaming entrypoint: read arguments, build each source's frame, hand each micro-batch to its writer.

Kept thin on purpose: everything it calls is tested locally. awsglue is imported only inside main(),
so this module imports (and its argument contract is tested) without Glue.

Arguments (Glue passes DefaultArguments as `--name value`; getResolvedOptions takes names without `--`):
JOB_ARGUMENTS, the job's own (JOB_NAME is supplied by Glue itself), and `--sources`, a JSON list with one object per
source the job runs: SOURCE_KEYS, plus SOURCE_TYPE_KEYS[source_type], plus ICEBERG_KEYS for an Iceberg dataset (a
routed source, whose records are several datasets: ROUTED_KEYS and each dataset's DATASET_KEYS instead). A job
runs one source or several (docs/streaming-job.md "One job, several sources"), each its own query with its own
checkpoint, lake, dead letters and batch ids (glue_jobs/sources/source_queries.py).
"""

from __future__ import annotations

import json
import logging
import sys

from glue_jobs.job_arguments import (  # noqa: F401 - the contract's names, read here by the tests and the rehearsal
    DATASET_KEYS,
    GLUE_SUPPLIED_ARGUMENTS,
    ICEBERG_KEYS,
    JOB_ARGUMENTS,
    ROUTED_KEYS,
    SOURCE_KEYS,
    SOURCE_TYPE_KEYS,
    TABLE_FORMATS,
    job_arguments,
    job_sources,
    routed_datasets,
    source_keys,
)

log = logging.getLogger("streamlake.glue_entry")


def resolve_arguments(argv: list[str]) -> dict[str, str]:
    from awsglue.utils import getResolvedOptions

    return getResolvedOptions(argv, list(JOB_ARGUMENTS))


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
    shows in `make diff`). A routed source: each of its datasets is checked so, and the route table is returned."""
    from glue_jobs.lake.lake_table import LakeTable

    routed = routed_datasets(args)
    digests = {name: args[f"dataset_digest.{name}"] for name in routed} if routed else {args["dataset"]: args["dataset_digest"]}
    for name, digest in digests.items():
        table = LakeTable.of(name)
        if table.dataset.digest != digest:
            raise ValueError(f"dataset {table.name}: the job zip's files have digest {table.dataset.digest}, the job "
                             f"arguments {digest}: the script, zip and arguments are from different synths")
    return route_table(args) if routed else table


def route_table(args: dict[str, str]):
    """A routed source's route table, from its `route_field` and `routes`: a Kinesis stream's RouteTable (by a field), a
    Kafka topic's SchemaRoutes (by registry schema, in `registry_name`); refuses routes naming another set of datasets
    than `datasets`."""
    from glue_jobs.decoding.routes import RouteTable
    from glue_jobs.decoding.schema_routes import SchemaRoutes

    try:
        values = json.loads(args["routes"])
    except ValueError as e:
        raise ValueError(f"source {args['source_name']}: routes is not JSON: {e}") from None
    if args["source_type"] == "kafka":
        table = SchemaRoutes.of(args["registry_name"], values, registry_key="registry_name", values_key="routes")
    else:
        table = RouteTable.of(args["route_field"], values, field_key="route_field", values_key="routes")
    if table.datasets != tuple(sorted(routed_datasets(args))):
        raise ValueError(f"source {args['source_name']}: routes name datasets {list(table.datasets)}, datasets says "
                         f"{args['datasets']}")
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
    """A Kafka job's source frame (Spark's Kafka source) and batch function: the registry versions of the dataset (of
    each dataset, routed: `writer` is then the routed writer, which takes the topic's frames as they come) are loaded
    (and checked against the zip's schema files) before the first record is read."""

    import boto3

    from glue_jobs.decoding.registry_frames import FrameDecoding, RegistryVersions, function_name
    from glue_jobs.kafka_job import KafkaBatches

    raw = spark.readStream.format("kafka").options(**kafka_reader_options(args)).load()
    if routed_datasets(args):
        return raw, writer
    registry = RegistryVersions(boto3.client("glue", region_name=args["metrics_region"]), registry_name=args["registry_name"],
                                schema_name=args["schema_name"], dataset=table.dataset)
    registry.load()
    decoding = FrameDecoding(spark, table.dataset, registry, name=function_name(args["source_name"]))
    return raw, KafkaBatches(writer, decoding, args["source_name"])


def routed_writer(spark, args: dict[str, str], routes, metrics):
    """A routed source's writer (glue_jobs/routed_batch.py): each dataset's rows to its lake path, its dead letters
    to `<dead_letter_path>/<dataset>`, the records no route takes to `<dead_letter_path>/unroutable`. A Kafka topic's
    writer routes frames with a KafkaRouter (each dataset's registry versions loaded first)."""
    from glue_jobs.decoding.routes import UNROUTABLE
    from glue_jobs.routed_batch import DatasetTarget, RoutedWriter

    router = None
    if args["source_type"] == "kafka":
        import boto3

        from glue_jobs.kafka_job import KafkaRouter

        router = KafkaRouter.loaded(spark, boto3.client("glue", region_name=args["metrics_region"]), routes, args["source_name"])
    dead = args["dead_letter_path"].rstrip("/")
    targets = {name: DatasetTarget(args[f"lake_path.{name}"], f"{dead}/{name}") for name in routes.datasets}
    return RoutedWriter(spark, source_name=args["source_name"], routes=routes, targets=targets,
                        dead_letter_path=f"{dead}/{UNROUTABLE}", checkpoint_path=args["checkpoint_path"], metrics=metrics,
                        count_replacements=router is None, router=router)  # Glue decodes Kinesis records to text


def source_batches(glue_context, args: dict[str, str], table):
    """One source's frame and batch function (the frame is only defined here: its query starts in the source's thread).
    `table`: the source's LakeTable, or a routed source's RouteTable (dataset_table)."""
    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.metrics import CloudWatchMetricsSink

    spark = glue_context.spark_session
    routed = bool(routed_datasets(args))
    metrics = CloudWatchMetricsSink(environment=args["environment"], namespace=args["metrics_namespace"],
                                    region=args["metrics_region"], routed=routed)
    if routed:
        writer = routed_writer(spark, args, table, metrics)
    else:
        writer = MicroBatchWriter(
            spark,
            source_name=args["source_name"],
            lake_path=args["lake_path"],
            dead_letter_path=args["dead_letter_path"],
            checkpoint_path=args["checkpoint_path"],
            metrics=metrics,
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
