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


def test_records_produced_to_the_broker_come_back_through_sparks_kafka_source(spark, broker):
    from pyspark.sql import functions as F

    topic = "orders-events"
    broker.create_topic(topic, partitions=3)
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
    from devtools.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path / "kafka").start()
    pid = broker.process.pid
    broker.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # neither the JVM nor anything it started is left in its process group


def test_a_topic_split_over_two_jobs_is_read_once_with_the_configs_settings(spark, broker):
    """The config's Kafka settings on a real broker: the topic is created with its compression.type and retention.ms
    (the broker refuses an unknown setting or value), each partition group's job reads only its partitions (Spark's
    assign from `--partitions`) in at least minPartitions Spark partitions, and together the jobs read every record
    once."""
    import dataclasses

    from confluent_kafka.admin import AdminClient, ConfigResource

    from glue_jobs.glue_entry import kafka_reader_options
    from infra.config import load_config

    topic = "orders-split"
    msk = dataclasses.replace(load_config().get("staging").msk, topic=topic, topic_partitions=3,
                              partition_groups=((0, 2), (1,)), min_partitions="auto")
    broker.create_topic(topic, 3, msk.topic_configs)
    resource = ConfigResource("topic", topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.describe_configs([resource])[resource].result(30)
    del admin
    assert {k: described[k].value for k in ("compression.type", "retention.ms")} == {
        "compression.type": "zstd", "retention.ms": str(168 * 3_600_000)}

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    for i in range(90):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0

    read = {}
    for source in msk.source_names:
        partitions, minimum = msk.partitions_of(source), msk.min_partitions_for(source, "G.1X", 4)
        args = {"bootstrap_servers": broker.bootstrap_servers, "topic": topic, "kafka_auth": "none",
                "starting_position": "earliest", "max_offsets_per_trigger": "1000",
                "partitions": ",".join(map(str, partitions)), "min_partitions": str(minimum)}
        batches = []
        query = (spark.readStream.format("kafka").options(**kafka_reader_options(args)).load()
                 .writeStream.foreachBatch(lambda frame, _id, batches=batches: batches.append(
                     (frame.rdd.getNumPartitions(), [(r["partition"], r["offset"]) for r in frame.collect()])))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        read[source] = [pair for _, rows in batches for pair in rows]
        assert minimum == 12 and all(n >= minimum for n, rows in batches if rows)
        assert {p for p, _ in read[source]} == set(partitions)
    assert msk.source_names == ("orders-p0", "orders-p1")
    everything = read["orders-p0"] + read["orders-p1"]
    assert len(everything) == len(set(everything)) == 90


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    """`kafka-storage format -t -abc...` reads the id as an option: a rehearsal failed so once (1 id in 64)."""
    import uuid

    from devtools import kafka_broker

    dashed, plain = uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=bytes(16))  # "-w..." then "AAAA..."
    draws = iter([dashed, plain])
    monkeypatch.setattr(kafka_broker.uuid, "uuid4", lambda: next(draws))
    assert kafka_broker.new_cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"
