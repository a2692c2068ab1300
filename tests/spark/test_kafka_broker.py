"""A real Kafka broker on loopback (Kafka's own, from Maven Central) read by Spark's own Kafka source.

What the Kafka path of the job will stand on: the broker starts and stops with the tests and leaves no
process; records produced by a client the project did not write (librdkafka, acks=all, idempotent) come
back through spark-sql-kafka with topic, partition, offset, timestamp and the bytes as produced.
"""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

confluent_kafka = pytest.importorskip("confluent_kafka")


def _create_topic(broker, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=30)


def test_records_produced_to_the_broker_come_back_through_sparks_kafka_source(spark, broker):
    from pyspark.sql import functions as F

    topic = "orders-events"
    _create_topic(broker, topic, partitions=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                                        "enable.idempotence": True, "compression.type": "zstd"})
    sent = {f"key-{i}".encode(): bytes([3, 0]) + os.urandom(16) + f"body {i}".encode() for i in range(60)}
    delivered = []
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(30) == 0
    assert [err for err, _ in delivered if err is not None] == []

    rows = (spark.read.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value", "topic", "partition", "offset", F.col("timestamp").cast("long").alias("ts"))
            .collect())

    assert {bytes(r["key"]): bytes(r["value"]) for r in rows} == sent
    assert {r["topic"] for r in rows} == {topic}
    assert len({(r["partition"], r["offset"]) for r in rows}) == len(sent)
    assert {r["partition"] for r in rows} <= {0, 1, 2} and all(r["offset"] >= 0 and r["ts"] > 0 for r in rows)
    # What the broker recorded per partition is what Spark read.
    by_partition = {m.partition(): 0 for _, m in delivered}
    for _, message in delivered:
        by_partition[message.partition()] += 1
    assert {p: sum(1 for r in rows if r["partition"] == p) for p in by_partition} == by_partition


def test_the_broker_stops_and_leaves_no_process(tmp_path):
    from infra_tools.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path / "kafka").start()
    pid = broker.process.pid
    broker.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # neither the JVM nor anything it started is left in its process group
