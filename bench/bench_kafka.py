"""Benchmark of the Kafka path: the runner reading a real broker against a bare read-decode-write of the same records.

    python bench/bench_kafka.py [--dataset orders] [--records 200000] [--partitions 4] [--warmup 2] [--repeats 3]

The records (glue_jobs/dataset_generate.py, valid only) are produced once, as Schema Registry frames
(operations/kafka_producer.py), to a one-node broker on loopback (devtools/kafka_broker.py), the registry on a moto
server. Then, in one Spark session, alternating:
(a) bare: Spark's Kafka source reads every offset of the topic (a batch query), `from_avro` (spark-avro) decodes
    the body after the 18-byte header with the dataset's schema, and the rows are written as Parquet by hour:
    what Spark alone needs, with no framing checks, no registry, no contract.
(b) runner: `run_local_kafka(once=True)` (the job's Kafka path: glue_jobs/kafka_job.py) with a fresh checkpoint:
    the JVM decoder (header, version map, Avro resolution, JSON rendering), the dataset's contract, dead
    letters, duplicate collapse, the staged publish with commit markers.
Warm-up passes (alternating) are excluded; the medians and bare/runner are reported.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_dataset import write_by_hour  # noqa: E402
from bench.rows import alternate, at_least, use_local_fs, write_result  # noqa: E402

TARGET_RATIO = 0.7
REGISTRY, REGION = "streamlake-bench", "eu-west-1"


def bare_read_decode_write(spark, dataset, bootstrap_servers: str, topic: str, out_dir: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    body = F.expr("substring(value, 19, length(value) - 18)")  # after byte 0 = 3, byte 1 = 0, the 16-byte UUID
    parsed = raw.select(from_avro(body, json.dumps(dataset.avro())).alias("r")).select("r.*")
    write_by_hour(parsed, dataset, out_dir)


def produce(broker, glue, dataset, topic: str, records: int, partitions: int, work: Path) -> int:
    from glue_jobs.dataset_generate import generate_dataset
    from operations.kafka_producer import AvroFramer, send

    generate_dataset(dataset, work / "input", records=records, files=1, bad_ratio=0.0, seed=17)
    lines = [(f"line {n}", text) for path in sorted((work / "input").iterdir())
             for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)]
    glue.create_registry(RegistryName=REGISTRY)
    version_id = glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=dataset.avro_full_name,
                                    DataFormat="AVRO", Compatibility="BACKWARD",
                                    SchemaDefinition=dataset.registry_definition(1))["SchemaVersionId"]
    for number in dataset.versions[1:]:
        version_id = glue.register_schema_version(
            SchemaId={"RegistryName": REGISTRY, "SchemaName": dataset.avro_full_name},
            SchemaDefinition=dataset.registry_definition(number))["SchemaVersionId"]
    broker.create_topic(topic, partitions)
    sent = send({"bootstrap.servers": broker.bootstrap_servers}, topic, lines, AvroFramer(dataset, version_id),
                unsent_path=work / "unsent.jsonl")
    if sent.failed:
        raise RuntimeError(f"{len(sent.failed)} records were not delivered to the bench broker: {sent.failed[0]}")
    return sent.sent


def runner(spark, registry, dataset, bootstrap_servers: str, topic: str, work: Path) -> dict:
    import os

    from glue_jobs.local_kafka import run_local_kafka

    shutil.rmtree(work, ignore_errors=True)
    with open(os.devnull, "w") as quiet:
        summary = run_local_kafka(bootstrap_servers=bootstrap_servers, topic=topic, registry=registry,
                                  lake_dir=str(work / "lake"), dead_letter_dir=str(work / "dead"),
                                  checkpoint_dir=str(work / "cp"), source_name="orders-bench", dataset=dataset.name,
                                  once=True, spark=spark, out=quiet)
    return summary.totals()


def main(argv: list[str] | None = None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="orders")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if min(args.records, args.partitions, args.repeats) < 1 or args.warmup < 0:
        parser.error("--records, --partitions and --repeats must be at least 1, --warmup at least 0")

    import boto3

    from devtools.kafka_broker import KafkaBroker
    from glue_jobs import datasets
    from glue_jobs.decoding.registry_frames import RegistryVersions
    from glue_jobs.local_runner import local_spark_session
    from rehearsal.moto import moto_server

    dataset = datasets.load(args.dataset)
    work = Path(args.work or f"bench-output/kafka-{dataset.name}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    topic = f"{dataset.name}-bench"
    with KafkaBroker(work / "kafka", jvm_options=()) as broker, moto_server() as endpoint:
        glue = boto3.client("glue", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="bench",
                            aws_secret_access_key="bench")
        started = time.perf_counter()
        sent = produce(broker, glue, dataset, topic, args.records, args.partitions, work)
        print(f"produced {sent} {dataset.name} frames to {args.partitions} partitions in "
              f"{time.perf_counter() - started:.1f} s", flush=True)
        spark = local_spark_session("streamlake-bench-kafka")
        cores = spark.sparkContext.defaultParallelism
        registry = RegistryVersions(glue, registry_name=REGISTRY, schema_name=dataset.avro_full_name, dataset=dataset)
        passes, totals = alternate(
            lambda: bare_read_decode_write(spark, dataset, broker.bootstrap_servers, topic, str(work / "bare")),
            lambda: runner(spark, registry, dataset, broker.bootstrap_servers, topic, work / "runner"),
            warmup=args.warmup, repeats=args.repeats, spark=spark)
        spark.stop()
    bare, ours = statistics.median(passes["bare"]), statistics.median(passes["runner"])
    ratio = bare / ours
    complete = totals["records_in"] == sent and totals["dead_letters"] == 0 and \
        totals["records_in"] == totals["records_written"] + totals["duplicates_collapsed"]
    result = {
        "dataset": dataset.name, "records": sent, "partitions": args.partitions, "cores": cores, "spark": spark.version,
        "bare_seconds": bare, "runner_seconds": ours, "ratio": ratio, "target": TARGET_RATIO,
        "met": ratio >= TARGET_RATIO, "passes": passes, "runner_totals": totals, "complete": complete,
        "rows": [at_least(f"kafka {dataset.name}: runner / bare read-decode-write from the broker, {sent:,} frames "
                          f"(bare {bare:.2f} s, runner {ours:.2f} s)", round(ratio, 3), TARGET_RATIO)],
    }
    write_result(Path(args.out or f"bench-output/kafka-{dataset.name}.json"), result)
    print(f"| kafka {dataset.name}, {sent:,} frames | bare {sent / bare / cores:,.0f} records/s/core ({bare:.2f} s) "
          f"| runner {sent / ours / cores:,.0f} records/s/core ({ours:.2f} s) | runner/bare = {ratio:.3f} "
          f"| >= {TARGET_RATIO} ({'met' if result['met'] else 'NOT met'}) | every frame read and written: {complete} |")
    # The target's verdict is bench/report.py's; a run that lost or dead-lettered a valid frame fails on its own.
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
