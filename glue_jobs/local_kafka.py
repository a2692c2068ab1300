"""The Kafka job's path on a local Spark (glue_jobs/kafka_job.py): a broker without IAM auth (the tests' loopback
broker), the Schema Registry through boto3 (AWS_ENDPOINT_URL for a local one). A topic carries one dataset
(`registry`: its RegistryVersions) or several, routed by registry schema (`routes`: a SchemaRoutes, and `glue`, the
registry's client): each dataset then goes to <lake>/<dataset> and <dead-letter>/<dataset>, what routes nowhere to
<dead-letter>/unroutable, as a routed run of files does (glue_jobs/local_runner.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from glue_jobs.batch import MicroBatchWriter
from glue_jobs.local_runner import (
    RunSummary,
    _batch_printer,
    _finish,
    _make_folders,
    _run_query,
    local_iceberg_target,
    local_spark_session,
)
from glue_jobs.metrics import LogMetricsSink


def run_local_kafka(
    *,
    bootstrap_servers: str,
    topic: str,
    lake_dir: str,
    dead_letter_dir: str,
    checkpoint_dir: str,
    source_name: str,
    registry=None,
    dataset: str | None = None,
    routes=None,
    glue=None,
    partitions: list[int] | None = None,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    min_partitions: int | None = None,
    once: bool = False,
    trigger_seconds: int = 5,
    spark=None,
    out: TextIO = sys.stdout,
    started_query=None,
    progress: bool = True,
) -> RunSummary:
    """`registry` and `dataset` (one dataset), or `routes` and `glue` (several: the module doc)."""
    from glue_jobs.kafka_job import reader_options

    if (routes is None) == (registry is None) or (routes is None) != (glue is None) or (routes is not None and dataset):
        raise ValueError("run_local_kafka takes registry and dataset (one dataset), or routes and glue (a routed topic)")
    _make_folders({"--lake": lake_dir, "--dead-letter": dead_letter_dir, "--checkpoint": checkpoint_dir})
    icebergs = {name: local_iceberg_target(name) for name in (routes.datasets if routes is not None else (dataset,))}
    spark = spark or local_spark_session(iceberg_warehouse=lake_dir if any(icebergs.values()) else None)
    lake, dead, checkpoint = (str(Path(folder).resolve()) for folder in (lake_dir, dead_letter_dir, checkpoint_dir))
    if routes is None:
        batches = _single(spark, registry, source_name, dataset, lake, dead, checkpoint, icebergs[dataset])
    else:
        batches = _routed(spark, glue, routes, source_name, lake, dead, checkpoint, icebergs)
    summary, started = RunSummary(routed=routes is not None), time.time()
    printed = _batch_printer(summary, started, out, progress)

    def on_batch(raw, batch_id: int) -> None:
        done = batches(raw, batch_id)
        for stats in done if isinstance(done, list) else [done]:
            printed(stats)

    options = reader_options(bootstrap_servers=bootstrap_servers, topic=topic, partitions=partitions,
                             starting_offsets=starting_offsets, max_offsets_per_trigger=max_offsets_per_trigger,
                             min_partitions=min_partitions, iam_auth=False)
    stream = spark.readStream.format("kafka").options(**options).load()
    _run_query(stream, on_batch, checkpoint_dir=checkpoint_dir, once=once, trigger_seconds=trigger_seconds,
               name=f"streamlake-{source_name}", out=out, started_query=started_query)
    return _finish(summary, started, lake_dir, dead_letter_dir, checkpoint_dir, out)


def _single(spark, registry, source_name: str, dataset: str, lake: str, dead: str, checkpoint: str, iceberg):
    from glue_jobs.decoding.registry_frames import FrameDecoding, function_name
    from glue_jobs.kafka_job import KafkaBatches

    registry.load()
    writer = MicroBatchWriter(spark, source_name=source_name, lake_path=lake, dead_letter_path=dead, checkpoint_path=checkpoint,
                              metrics=LogMetricsSink(), dataset=dataset, iceberg=iceberg)
    decoding = FrameDecoding(spark, writer.table.dataset, registry, name=function_name(source_name))
    return KafkaBatches(writer, decoding, source_name)


def _routed(spark, glue, routes, source_name: str, lake: str, dead: str, checkpoint: str, icebergs: dict):
    from glue_jobs.kafka_job import KafkaRouter
    from glue_jobs.routed_batch import RoutedWriter

    router = KafkaRouter.loaded(spark, glue, routes, source_name)
    return RoutedWriter.under(spark, source_name=source_name, routes=routes, lake_root=lake, dead_letter_root=dead,
                              checkpoint_path=checkpoint, icebergs=icebergs, metrics=LogMetricsSink(), router=router)
