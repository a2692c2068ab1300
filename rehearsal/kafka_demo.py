"""`make demo`'s Kafka path: a real broker, a registry, the producer, the Kafka job, then everything stopped.

    python -m rehearsal.kafka_demo --out DIR [--records N] [--dataset orders]

Starts Apache Kafka's broker on loopback (devtools/kafka_broker.py) and a moto server as the Glue Schema
Registry, registers the dataset's committed versions, produces the dataset's generated records as Schema Registry
frames (operations/kafka_producer.py) plus one of each frame the job cannot decode, runs the Kafka job's path once
(`glue_jobs.local_kafka.run_local_kafka`), and stops the broker and the server, also when a step fails.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path


def run(out: Path, *, records: int, dataset_name: str, seed: int = 7) -> int:
    import boto3
    from confluent_kafka import Producer

    from devtools.kafka_broker import KafkaBroker
    from glue_jobs import datasets
    from glue_jobs.dataset_generate import generate_dataset
    from glue_jobs.decoding.registry_frames import RegistryVersions
    from glue_jobs.local_kafka import run_local_kafka
    from glue_jobs.local_runner import configure_logging
    from infra.config import load_config
    from operations.kafka_producer import AvroFramer, send
    from rehearsal.moto import moto_server
    from rehearsal.scenario import bad_frames

    configure_logging()
    dataset = datasets.load(dataset_name)
    generated = out / "input"
    end = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    expect = generate_dataset(dataset, generated, records=records, files=1, bad_ratio=0.0, seed=seed, end=end)
    lines = [(f"{path.name}:{n}", text) for path in sorted(generated.iterdir())
             for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)]
    topic, registry_name, schema_name = f"{dataset_name}-events", "streamlake-demo", dataset.avro_full_name
    with KafkaBroker(out / "kafka") as broker, moto_server() as endpoint:
        glue = boto3.client("glue", endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id="demo",
                            aws_secret_access_key="demo")
        glue.create_registry(RegistryName=registry_name)
        version_id = glue.create_schema(RegistryId={"RegistryName": registry_name}, SchemaName=schema_name,
                                        DataFormat="AVRO", Compatibility="BACKWARD",
                                        SchemaDefinition=dataset.registry_definition(1))["SchemaVersionId"]
        for number in dataset.versions[1:]:
            version_id = glue.register_schema_version(SchemaId={"RegistryName": registry_name, "SchemaName": schema_name},
                                                      SchemaDefinition=dataset.registry_definition(number))["SchemaVersionId"]
        broker.create_topic(topic, 3, load_config().get("staging").msk.topic_configs)  # the topic as MSK gets it
        framer = AvroFramer(dataset, version_id)
        sent = send({"bootstrap.servers": broker.bootstrap_servers}, topic, lines, framer, unsent_path=out / "unsent.jsonl")
        bad = bad_frames(framer.frame(lines[0][1], lines[0][0])[1])
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        for value, _ in bad.values():
            producer.produce(topic, value=value)
        undelivered = producer.flush(30)
        del producer  # librdkafka's client closes here, before the broker stops
        if undelivered:
            raise RuntimeError("the bad frames were not all delivered")
        print(f"produced {sent.sent} {dataset_name} frames ({expect.duplicates} duplicates) and {len(bad)} undecodable "
              f"values ({', '.join(bad)}) to {topic} on {broker.bootstrap_servers}")
        registry = RegistryVersions(glue, registry_name=registry_name, schema_name=schema_name, dataset=dataset)
        summary = run_local_kafka(bootstrap_servers=broker.bootstrap_servers, topic=topic, registry=registry,
                                  lake_dir=str(out / "lake"), dead_letter_dir=str(out / "dead-letters"),
                                  checkpoint_dir=str(out / "checkpoint"), source_name=dataset_name, dataset=dataset_name,
                                  once=True, max_offsets_per_trigger=max(1, records // 2))
    totals = summary.totals()
    # Every frame read once, each undecodable one a dead letter, the counts reconciled. A duplicate whose first
    # copy came in an earlier micro-batch is written again: compaction keeps one per key (the next demo step).
    expected = (sent.sent + len(bad), len(bad))
    got = (totals["records_in"], totals["dead_letters"])
    reconciled = totals["records_in"] == totals["records_written"] + totals["dead_letters"] + totals["duplicates_collapsed"]
    if got != expected or not reconciled or totals["records_written"] < len(expect.valid_keys):
        print(f"records in, dead letters: {got}, expected {expected}; totals {totals}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearsal.kafka_demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the input, lake, dead letters, checkpoint, broker")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--dataset", default="orders")
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be at least 1")
    return run(Path(args.out), records=args.records, dataset_name=args.dataset)


if __name__ == "__main__":
    sys.exit(main())
