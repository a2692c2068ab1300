"""The Kafka job's path end to end on a real broker: the project's producer frames orders with the version's
registry UUID (the registry: moto's Glue Schema Registry on a moto server), Spark's Kafka source reads them,
the JVM decoder and the contract sort them into lake rows and dead letters.

Default Spark line only (broker, e2e): Kafka's own broker from Maven Central on loopback, stopped after.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

confluent_kafka = pytest.importorskip("confluent_kafka")
moto_server = pytest.importorskip("moto.server")

from glue_jobs import datasets  # noqa: E402
from glue_jobs.dataset_generate import RecordMaker, decimal_literal  # noqa: E402
from glue_jobs.decoding.registry_frames import ZLIB, RegistryVersions  # noqa: E402
from tests.processes import kill_group  # noqa: E402

REGISTRY, SCHEMA = "streamlake-test", "orders"
REPOSITORY_DATASETS = Path(__file__).resolve().parents[2] / "datasets"


@pytest.fixture(scope="module")
def glue(monkeypatch_module):
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch_module.setenv(name, value)
    try:
        yield boto3.client("glue", endpoint_url=f"http://{host}:{port}", region_name="eu-west-1")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    patch.setenv(datasets.ROOT_VARIABLE, str(REPOSITORY_DATASETS))
    yield patch
    patch.undo()


@pytest.fixture(scope="module")
def orders(monkeypatch_module):
    return datasets.load("orders")


@pytest.fixture(scope="module")
def version_1(glue, orders) -> str:
    """The registry as the stack leaves it (infra/catalog.py): the dataset's schema with version 1 registered."""
    glue.create_registry(RegistryName=REGISTRY)
    created = glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=SCHEMA, DataFormat="AVRO",
                                 Compatibility="BACKWARD", SchemaDefinition=orders.registry_definition(1))
    return created["SchemaVersionId"]


def _valid_orders(orders, count: int, first: int = 0) -> list[str]:
    maker = RecordMaker(orders, seed=5)
    now = datetime.now(timezone.utc)
    return [decimal_literal(maker.valid(first + n, now - timedelta(minutes=n))) for n in range(count)]


def _bad_frames(orders, version_id: str) -> dict[str, tuple[bytes, str]]:
    from operations.kafka_producer import AvroFramer
    from rehearsal.scenario import bad_frames

    _, good = AvroFramer(orders, version_id).frame(_valid_orders(orders, 1, first=900)[0], "bad")
    return bad_frames(good)


def _produce_raw(broker, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _lake_and_dead_letters(spark, base: Path):
    lake = spark.read.parquet(str(base / "lake")).select("order_id", "source_partition", "source_offset").collect()
    dead = spark.read.parquet(str(base / "dead")).select("reason", "detail", "payload", "source_partition", "source_offset").collect()
    return lake, dead


def test_valid_and_bad_frames_become_rows_and_dead_letters_and_the_job_keeps_running(spark, broker, glue, orders, version_1, tmp_path):
    from glue_jobs.local_kafka import run_local_kafka
    from operations.kafka_producer import AvroFramer, send

    topic = "orders-events"
    broker.create_topic(topic, partitions=3)
    valid = _valid_orders(orders, 40)
    sent = send({"bootstrap.servers": broker.bootstrap_servers}, topic, [(f"line {i + 1}", t) for i, t in enumerate(valid[:20])],
                AvroFramer(orders, version_1))
    assert (sent.sent, sent.failed) == (20, [])
    bad = _bad_frames(orders, version_1)
    _produce_raw(broker, topic, [value for value, _ in bad.values()])

    queries, out = [], []
    registry = RegistryVersions(glue, registry_name=REGISTRY, schema_name=SCHEMA, dataset=orders)
    runner = threading.Thread(target=run_local_kafka, kwargs=dict(
        bootstrap_servers=broker.bootstrap_servers, topic=topic, registry=registry, lake_dir=str(tmp_path / "lake"),
        dead_letter_dir=str(tmp_path / "dead"), checkpoint_dir=str(tmp_path / "checkpoint"), source_name="orders",
        dataset="orders", trigger_seconds=1, spark=spark, started_query=queries.append, out=_Lines(out)))
    runner.start()
    try:
        _wait(lambda: sum(_batch_counts(out, "in")) >= 27, "the first 27 records")
        # After the bad frames, more valid ones (zlib-compressed frames too): the job did not stall on the bad ones.
        later = send({"bootstrap.servers": broker.bootstrap_servers}, topic, [(f"line {i + 21}", t) for i, t in enumerate(valid[20:])],
                     AvroFramer(orders, version_1, compression=ZLIB))
        assert later.sent == 20
        _wait(lambda: sum(_batch_counts(out, "in")) >= 47, "all 47 records")
        assert queries[0].isActive and queries[0].exception() is None
    finally:
        for query in queries:
            query.stop()
        runner.join(60)
    lake, dead = _lake_and_dead_letters(spark, tmp_path)
    produced = {(p, o) for p, o in sent.offsets + later.offsets}
    assert sorted(r.order_id for r in lake) == sorted(f"order_id-{n:08d}" for n in range(40))
    assert {(int(r.source_partition), int(r.source_offset)) for r in lake} == produced
    assert sorted(r.reason for r in dead) == sorted(reason for _, reason in bad.values())
    assert all(r.source_partition is not None and r.source_offset is not None for r in dead)
    import base64

    assert sorted(base64.b64decode(r.payload) for r in dead) == sorted(value for value, _ in bad.values())


class _Lines(list):
    """A text sink collecting the runner's printed lines (its `out`)."""

    def __init__(self, lines: list) -> None:
        super().__init__()
        self.lines = lines

    def write(self, text: str) -> int:
        self.lines.extend(line for line in text.splitlines() if line)
        return len(text)

    def flush(self) -> None:
        pass


def _batch_counts(lines: list[str], counter: str) -> list[int]:
    return [int(part.split("=")[1]) for line in list(lines) if line.startswith("batch ")
            for part in line.split() if part.startswith(f"{counter}=")]


def _wait(condition, what: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _kafka_runner(broker, endpoint: str, tmp_path: Path, topic: str, *extra: str) -> tuple[list[str], dict]:
    import os
    import sys

    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "glue_jobs", "run-kafka", "--bootstrap-servers", broker.bootstrap_servers,
               "--topic", topic, "--registry-name", REGISTRY, "--schema-name", SCHEMA, "--dataset", "orders",
               "--source-name", "orders", "--lake", str(tmp_path / "lake"), "--dead-letter", str(tmp_path / "dead"),
               "--checkpoint", str(tmp_path / "checkpoint"), *extra]
    env = {**os.environ, "PYTHONPATH": str(repo), "PYSPARK_PYTHON": sys.executable, "STREAMLAKE_SPARK_MASTER": "local[2]",
           "STREAMLAKE_DRIVER_MEMORY": "1g", "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1",
           datasets.ROOT_VARIABLE: str(REPOSITORY_DATASETS)}
    return command, env


def test_sigkill_at_three_random_moments_then_every_valid_record_exactly_once(spark, broker, glue, orders, version_1, tmp_path):
    """The Kafka job killed (SIGKILL to its process group: the JVM too) at three moments drawn from a printed seed,
    restarted on its checkpoint each time, then run to the end: every valid record once, every bad frame once."""
    import os
    import random
    import subprocess

    from operations.kafka_producer import AvroFramer, send

    seed = int(os.environ.get("STREAMLAKE_KILL_SEED", random.randrange(1_000_000)))
    print(f"kill seed {seed} (STREAMLAKE_KILL_SEED={seed} repeats these moments)")
    rng = random.Random(seed)
    topic = "orders-kill"
    broker.create_topic(topic, partitions=3)
    valid = _valid_orders(orders, 600, first=1000)
    sent = send({"bootstrap.servers": broker.bootstrap_servers}, topic, [(f"line {i + 1}", t) for i, t in enumerate(valid)],
                AvroFramer(orders, version_1))
    assert sent.sent == 600
    bad = _bad_frames(orders, version_1)
    _produce_raw(broker, topic, [value for value, _ in bad.values()])
    endpoint = glue.meta.endpoint_url
    command, env = _kafka_runner(broker, endpoint, tmp_path, topic, "--max-offsets-per-trigger", "60", "--trigger-seconds", "1")
    for attempt in range(3):
        stderr = tmp_path / f"runner-{attempt}.err"  # kept, so a runner that ends early says why
        with open(stderr, "w") as err:
            process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                       start_new_session=True)
        try:
            wanted, seen, deadline = rng.randint(1, 3), 0, time.time() + 300
            while seen < wanted and time.time() < deadline:  # a number of committed batches, then a random delay
                line = process.stdout.readline()
                if not line:
                    break
                seen += line.startswith("batch ")
            assert seen == wanted, (f"run {attempt + 1}: the runner stopped before {wanted} batches (seed {seed}, exit "
                                    f"{process.poll()}):\n{stderr.read_text()[-3000:]}")
            time.sleep(rng.uniform(0.0, 2.0))  # between two batches, or inside the next one
        finally:
            kill_group(process)
    done = subprocess.run([*command[:-4], "--once"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lake, dead = _lake_and_dead_letters(spark, tmp_path)
    keys = [r.order_id for r in lake]
    assert len(keys) == len(set(keys)), f"a record was written twice (seed {seed})"
    assert sorted(keys) == sorted(f"order_id-{n:08d}" for n in range(1000, 1600)), f"seed {seed}"
    assert {(int(r.source_partition), int(r.source_offset)) for r in lake} == set(sent.offsets)
    assert sorted(r.reason for r in dead) == sorted(reason for _, reason in bad.values()), f"seed {seed}"


def _commit_orders_v2(tmp_path: Path, monkeypatch) -> dict:
    """The repository's datasets/ with orders v2 committed (shipping.region, a nested optional field), made the
    datasets root: what a deploy of that commit ships. Returns the v2 schema."""
    import json
    import shutil

    root = tmp_path / "datasets"
    shutil.copytree(REPOSITORY_DATASETS, root)
    v1 = json.loads((root / "orders" / "schema.v1.avsc").read_text())
    v2 = json.loads(json.dumps(v1))
    next(f for f in v2["fields"] if f["name"] == "shipping")["type"][1]["fields"].append(
        {"name": "region", "type": ["null", "string"], "default": None})
    text = json.dumps(v2).encode()
    (root / "orders" / "schema.v2.avsc").write_bytes(text)
    lock = json.loads((root / "orders" / "schemas.lock.json").read_text())
    (root / "orders" / "schemas.lock.json").write_text(json.dumps({**lock, "schema.v2.avsc": datasets.file_digest(text)}))
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(root))
    return v2


def test_v1_and_v2_frames_in_one_topic_decode_and_a_version_newer_than_the_deployment_is_a_dead_letter(
        spark, broker, glue, tmp_path, monkeypatch):
    """orders with v2 committed (shipping.region, a nested optional field): v1 frames still in the topic decode
    beside v2 frames (v1 rows get null); a v3 registered after the job started (not deployed) is looked up when
    its frames arrive and dead-lettered with the reason, not read as v2 with its new field dropped."""
    import io
    import json

    from glue_jobs.local_kafka import run_local_kafka
    from operations.kafka_producer import AvroFramer, send

    v2 = _commit_orders_v2(tmp_path, monkeypatch)
    orders_v2 = datasets.load("orders")
    registry_name, schema_name = "evolving", "orders-evolving"
    glue.create_registry(RegistryName=registry_name)
    schema_id = {"RegistryName": registry_name, "SchemaName": schema_name}
    first = glue.create_schema(RegistryId={"RegistryName": registry_name}, SchemaName=schema_name, DataFormat="AVRO",
                               Compatibility="BACKWARD", SchemaDefinition=orders_v2.registry_definition(1))["SchemaVersionId"]
    second = glue.register_schema_version(SchemaId=schema_id, SchemaDefinition=orders_v2.registry_definition(2))["SchemaVersionId"]
    topic = "orders-evolving"
    broker.create_topic(topic, partitions=2)

    records = _valid_orders(orders_v2, 12, first=2000)
    assert send({"bootstrap.servers": broker.bootstrap_servers}, topic, [(f"v1 {i}", t) for i, t in enumerate(records[:6])],
                AvroFramer(orders_v2, first, version=1)).sent == 6  # an old producer, still on v1
    with_region = [json.dumps({**json.loads(t), "shipping": {"country": "DE", "city": None, "express": True, "region": "NRW"}})
                   for t in records[6:]]
    assert send({"bootstrap.servers": broker.bootstrap_servers}, topic, [(f"v2 {i}", t) for i, t in enumerate(with_region)],
                AvroFramer(orders_v2, second)).sent == 6
    # v3 registered after the deployment (the job's zip has v1 and v2): a producer already writes it.
    v3 = json.loads(json.dumps(v2))
    v3["fields"].append({"name": "channel", "type": ["null", "string"], "default": None})
    third = glue.register_schema_version(SchemaId=schema_id, SchemaDefinition=json.dumps(v3))["SchemaVersionId"]
    from glue_jobs.decoding.registry_frames import frame
    from tests.spark.test_registry_frames import ORDER, avro_body

    _produce_raw(broker, topic, [frame(third, avro_body(v3, {**ORDER, "order_id": "o-v3", "channel": "app"}))])

    registry = RegistryVersions(glue, registry_name=registry_name, schema_name=schema_name, dataset=orders_v2)
    summary = run_local_kafka(bootstrap_servers=broker.bootstrap_servers, topic=topic, registry=registry,
                              lake_dir=str(tmp_path / "lake"), dead_letter_dir=str(tmp_path / "dead"),
                              checkpoint_dir=str(tmp_path / "checkpoint"), source_name="orders", dataset="orders", once=True,
                              spark=spark, out=io.StringIO())
    assert (summary.total("records_in"), summary.total("records_written"), summary.total("dead_letters")) == (13, 12, 1)
    rows = spark.read.parquet(str(tmp_path / "lake")).select("order_id", "shipping.region").collect()
    assert sorted((r.order_id, r.region) for r in rows) == sorted(
        [(json.loads(t)["order_id"], None) for t in records[:6]] + [(json.loads(t)["order_id"], "NRW") for t in with_region])
    (dead,) = spark.read.parquet(str(tmp_path / "dead")).collect()
    assert dead.reason == "unknown_schema_version"
    assert dead.detail == (f"schema version {third} is not a version this job can read: version 3 of the registry schema, "
                           "newer than the deployed dataset (v2): deploy it, then replay the dead letters")


def test_offsets_deleted_from_the_topic_fail_the_job_loudly_instead_of_skipping(spark, broker, glue, orders, version_1,
                                                                               tmp_path):
    """The expired-offsets choice (docs/kafka.md "Expired offsets", failOnDataLoss=true): records the topic no longer
    holds past the checkpoint's position (deleted here with DeleteRecords, as retention deletes old segments) stop
    the job with Spark's data-loss error; nothing is skipped silently."""
    import io

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from glue_jobs.local_kafka import run_local_kafka
    from operations.kafka_producer import AvroFramer, send

    topic = "orders-expiring"
    broker.create_topic(topic, partitions=1)
    framer = AvroFramer(orders, version_1)
    settings = {"bootstrap.servers": broker.bootstrap_servers}
    assert send(settings, topic, [(f"a {i}", t) for i, t in enumerate(_valid_orders(orders, 5, first=3000))], framer).sent == 5
    registry = RegistryVersions(glue, registry_name=REGISTRY, schema_name=SCHEMA, dataset=orders)
    run = dict(bootstrap_servers=broker.bootstrap_servers, topic=topic, registry=registry, lake_dir=str(tmp_path / "lake"),
               dead_letter_dir=str(tmp_path / "dead"), checkpoint_dir=str(tmp_path / "checkpoint"), source_name="orders",
               dataset="orders", once=True, spark=spark, out=io.StringIO())
    assert run_local_kafka(**run).total("records_written") == 5  # the checkpoint now points at offset 5
    assert send(settings, topic, [(f"b {i}", t) for i, t in enumerate(_valid_orders(orders, 5, first=3100))], framer).sent == 5
    admin = AdminClient(settings)
    (future,) = admin.delete_records([TopicPartition(topic, 0, 8)]).values()  # offsets 5-7 gone before they were read
    assert future.result(timeout=30).low_watermark == 8
    del admin
    with pytest.raises(Exception, match=r"(?s)Cannot fetch offset 5 .*Some data may have been lost"):
        run_local_kafka(**run)  # Spark's data-loss error, raised inside the batch: nothing of it is published
    assert spark.read.parquet(str(tmp_path / "lake")).count() == 5  # nothing after the gap was written either


def test_partitions_added_to_the_topic_are_read_from_their_start_after_a_restart(spark, broker, glue, orders, version_1,
                                                                                   tmp_path):
    """Checkpoint survival when the topic grows (issue 34): 2 partitions, a run, 2 partitions added, more records
    across all 4, a run from the same checkpoint. Spark's Kafka source reads partitions it discovers from their
    earliest offset (structured-streaming-kafka-integration: newly discovered partitions start at earliest), so every
    record is in the lake exactly once and the new partitions' records carry their partition number."""
    import io

    from confluent_kafka.admin import AdminClient, NewPartitions

    from glue_jobs.local_kafka import run_local_kafka
    from operations.kafka_producer import AvroFramer, send

    topic = "orders-growing"
    broker.create_topic(topic, partitions=2)
    framer = AvroFramer(orders, version_1)
    settings = {"bootstrap.servers": broker.bootstrap_servers}
    first = _valid_orders(orders, 20, first=4000)
    assert send(settings, topic, [(f"a {i}", t) for i, t in enumerate(first)], framer).sent == 20
    registry = RegistryVersions(glue, registry_name=REGISTRY, schema_name=SCHEMA, dataset=orders)
    run = dict(bootstrap_servers=broker.bootstrap_servers, topic=topic, registry=registry, lake_dir=str(tmp_path / "lake"),
               dead_letter_dir=str(tmp_path / "dead"), checkpoint_dir=str(tmp_path / "checkpoint"), source_name="orders",
               dataset="orders", once=True, spark=spark, out=io.StringIO())
    assert run_local_kafka(**run).total("records_written") == 20
    admin = AdminClient(settings)  # kept while its future resolves
    (future,) = admin.create_partitions([NewPartitions(topic, 4)]).values()
    future.result(timeout=30)
    del admin
    second = _valid_orders(orders, 40, first=4100)
    assert send(settings, topic, [(f"b {i}", t) for i, t in enumerate(second)], framer).sent == 40
    summary = run_local_kafka(**run)
    assert summary.total("records_in") == 40 and summary.total("records_written") == 40
    lake = spark.read.parquet(str(tmp_path / "lake")).select("order_id", "source_partition").collect()
    ids = [r.order_id for r in lake]
    assert len(ids) == 60 and len(set(ids)) == 60  # in: 60, out: 60, duplicates: 0
    assert {r.source_partition for r in lake} == {"0", "1", "2", "3"}


def test_a_redeploy_with_changed_job_code_resumes_from_the_checkpoint_without_loss_or_replay(spark, broker, glue, tmp_path,
                                                                                             monkeypatch):
    """Checkpoint survival across a redeploy (issue 34): the job runs with the checkpoint on the deployed code (orders
    v1), then the code changes (orders v2 committed: the package, the dataset digest and the decoder's version map
    all differ) and the job restarts on the same checkpoint. Every record once: none of the first run's read again,
    the new ones (v1 and v2 frames) read."""
    import io
    import json

    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.local_kafka import run_local_kafka
    from operations.kafka_producer import AvroFramer, send

    orders_v1 = datasets.load("orders")
    registry_name, schema_name = "redeploying", "orders-redeploying"
    glue.create_registry(RegistryName=registry_name)
    first = glue.create_schema(RegistryId={"RegistryName": registry_name}, SchemaName=schema_name, DataFormat="AVRO",
                               Compatibility="BACKWARD", SchemaDefinition=orders_v1.registry_definition(1))["SchemaVersionId"]
    topic = "orders-redeploying"
    broker.create_topic(topic, partitions=2)
    settings = {"bootstrap.servers": broker.bootstrap_servers}
    before = _valid_orders(orders_v1, 15, first=5000)
    assert send(settings, topic, [(f"a {i}", t) for i, t in enumerate(before)], AvroFramer(orders_v1, first)).sent == 15
    run = dict(bootstrap_servers=broker.bootstrap_servers, topic=topic, lake_dir=str(tmp_path / "lake"),
               dead_letter_dir=str(tmp_path / "dead"), checkpoint_dir=str(tmp_path / "checkpoint"), source_name="orders",
               dataset="orders", once=True, spark=spark, out=io.StringIO())
    registry = RegistryVersions(glue, registry_name=registry_name, schema_name=schema_name, dataset=orders_v1)
    assert run_local_kafka(registry=registry, **run).total("records_written") == 15

    _commit_orders_v2(tmp_path, monkeypatch)  # the redeploy: new files in the package, v2 registered by the stack
    orders_v2 = datasets.load("orders")
    assert orders_v2.digest != orders_v1.digest
    second = glue.register_schema_version(SchemaId={"RegistryName": registry_name, "SchemaName": schema_name},
                                          SchemaDefinition=orders_v2.registry_definition(2))["SchemaVersionId"]
    after_v1 = _valid_orders(orders_v2, 10, first=5100)
    after_v2 = [json.dumps({**json.loads(t), "shipping": {"country": "DE", "city": None, "express": True, "region": "NRW"}})
                for t in _valid_orders(orders_v2, 10, first=5200)]
    assert send(settings, topic, [(f"b {i}", t) for i, t in enumerate(after_v1)], AvroFramer(orders_v2, first, version=1)).sent == 10
    assert send(settings, topic, [(f"c {i}", t) for i, t in enumerate(after_v2)], AvroFramer(orders_v2, second)).sent == 10
    registry = RegistryVersions(glue, registry_name=registry_name, schema_name=schema_name, dataset=orders_v2)
    summary = run_local_kafka(registry=registry, **run)
    assert (summary.total("records_in"), summary.total("records_written"), summary.total("dead_letters")) == (20, 20, 0)
    lake = spark.read.schema(LakeTable.of(orders_v2).spark_schema()).parquet(str(tmp_path / "lake"))
    rows = lake.select("order_id", "shipping.region").collect()
    ids = [r.order_id for r in rows]
    assert len(ids) == 35 and len(set(ids)) == 35  # in: 35, out: 35, duplicates: 0
    assert sorted(r.order_id for r in rows if r.region == "NRW") == sorted(json.loads(t)["order_id"] for t in after_v2)


def test_a_routed_topic_killed_at_three_seeded_moments_holds_each_datasets_records_once(spark, broker, glue, tmp_path, monkeypatch):
    """One topic carrying orders and sensor readings (a dataset added as files), v1 and v2 of each, with frames of a
    registry schema no dataset is bound to and undecodable ones: `run-kafka --route-schema` killed (SIGKILL to its
    process group) at three seeded moments, restarted on its checkpoint each time, then run to the end. Each dataset's
    lake holds each of its valid records once, the bad frames are each once in the dataset their schema names or in
    the source's own dead letters, and the frames of the unbound schema are the source's `unroutable` ones."""
    import base64
    import json
    import os
    import random
    import shutil
    import subprocess
    import sys

    from glue_jobs.decoding.registry_frames import frame
    from operations.kafka_producer import AvroFramer, send
    from rehearsal.scenario import bad_frames
    from tests.spark.routing_support import EXAMPLES, reading

    seed = int(os.environ.get("STREAMLAKE_KILL_SEED", random.randrange(1_000_000)))
    print(f"kill seed {seed} (STREAMLAKE_KILL_SEED={seed} repeats these moments)")
    rng = random.Random(seed)
    _commit_orders_v2(tmp_path, monkeypatch)
    root = tmp_path / "datasets"
    shutil.copytree(EXAMPLES / "datasets" / "sensor_readings", root / "sensor_readings")
    readings_v2 = json.loads((root / "sensor_readings" / "schema.v1.avsc").read_text())
    readings_v2["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
    text = json.dumps(readings_v2).encode()
    (root / "sensor_readings" / "schema.v2.avsc").write_bytes(text)
    lock = json.loads((root / "sensor_readings" / "schemas.lock.json").read_text())
    (root / "sensor_readings" / "schemas.lock.json").write_text(json.dumps({**lock, "schema.v2.avsc": datasets.file_digest(text)}))
    orders, readings = datasets.load("orders"), datasets.load("sensor_readings")

    registry = "routed-kill"
    glue.create_registry(RegistryName=registry)
    ids = {}
    for schema_name, dataset in (("orders-r", orders), ("readings-r", readings), ("refunds", None)):
        definition = dataset.registry_definition(1) if dataset else json.dumps(
            {"type": "record", "name": "Refund", "fields": [{"name": "event_id", "type": "string"}]})
        ids[schema_name, 1] = glue.create_schema(RegistryId={"RegistryName": registry}, SchemaName=schema_name, DataFormat="AVRO",
                                                 Compatibility="BACKWARD", SchemaDefinition=definition)["SchemaVersionId"]
        if dataset:
            ids[schema_name, 2] = glue.register_schema_version(SchemaId={"RegistryName": registry, "SchemaName": schema_name},
                                                               SchemaDefinition=dataset.registry_definition(2))["SchemaVersionId"]
    topic = "mixed-kill"
    broker.create_topic(topic, partitions=3)
    server = {"bootstrap.servers": broker.bootstrap_servers}
    order_texts = _valid_orders(orders, 300, first=3000)
    reading_texts = [reading(f"r-{n:05d}", minute=n % 50, **({"note": "v2"} if n >= 150 else {})) for n in range(300)]
    sent = [send(server, topic, [(f"{kind} {i}", t) for i, t in enumerate(texts)], AvroFramer(dataset, ids[schema, version], version=version))
            for kind, texts, dataset, schema, version in (
                ("orders v1", order_texts[:150], orders, "orders-r", 1), ("readings v1", reading_texts[:150], readings, "readings-r", 1),
                ("orders v2", order_texts[150:], orders, "orders-r", 2), ("readings v2", reading_texts[150:], readings, "readings-r", 2))]
    assert [s.sent for s in sent] == [150, 150, 150, 150]
    refunds = [frame(ids["refunds", 1], b"\x08x-%03d" % n) for n in range(20)]
    bad = bad_frames(AvroFramer(orders, ids["orders-r", 1], version=1).frame(order_texts[0], "bad")[1])
    _produce_raw(broker, topic, refunds + [value for value, _ in bad.values()])

    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "glue_jobs", "run-kafka", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
               "--registry-name", registry, "--route-schema", "orders-r=orders", "--route-schema", "readings-r=sensor_readings",
               "--source-name", "mixed", "--lake", str(tmp_path / "lake"), "--dead-letter", str(tmp_path / "dead"),
               "--checkpoint", str(tmp_path / "checkpoint"), "--max-offsets-per-trigger", "90", "--trigger-seconds", "1"]
    env = {**os.environ, "PYTHONPATH": str(repo), "PYSPARK_PYTHON": sys.executable, "STREAMLAKE_SPARK_MASTER": "local[2]",
           "STREAMLAKE_DRIVER_MEMORY": "1g", "AWS_ENDPOINT_URL": glue.meta.endpoint_url, datasets.ROOT_VARIABLE: str(root)}
    for attempt in range(3):
        stderr = tmp_path / f"runner-{attempt}.err"
        with open(stderr, "w") as err:
            process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        try:
            wanted, seen, deadline = rng.randint(1, 2), 0, time.time() + 300
            while seen < wanted and time.time() < deadline:
                line = process.stdout.readline()
                if not line:
                    break
                seen += line.startswith("batch ") and " unroutable:" in line  # a batch's last part line
            assert seen == wanted, (f"run {attempt + 1}: the runner stopped before {wanted} batches (seed {seed}, exit "
                                    f"{process.poll()}):\n{stderr.read_text()[-3000:]}")
            time.sleep(rng.uniform(0.0, 2.0))
        finally:
            kill_group(process)
    done = subprocess.run([*command[:-4], "--once"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    order_keys = [r.order_id for r in spark.read.parquet(str(tmp_path / "lake" / "orders")).select("order_id").collect()]
    assert len(order_keys) == len(set(order_keys)) and sorted(order_keys) == sorted(json.loads(t)["order_id"] for t in order_texts), \
        f"seed {seed}"
    reading_ids = [r.event_id for r in spark.read.parquet(str(tmp_path / "lake" / "sensor_readings")).select("event_id").collect()]
    assert sorted(reading_ids) == [f"r-{n:05d}" for n in range(300)], f"seed {seed}"
    dead = {name: spark.read.parquet(str(tmp_path / "dead" / name)).select("reason", "payload").collect()
            for name in ("orders", "unroutable")}
    assert sorted(r.reason for r in dead["orders"]) == ["malformed_record"] * 3, f"seed {seed}"  # a bad body of an orders version
    assert sorted(r.reason for r in dead["unroutable"]) == ["malformed_record"] * 3 + ["unroutable"] * 21, f"seed {seed}"
    assert sorted(base64.b64decode(r.payload) for r in dead["orders"] + dead["unroutable"]) == sorted(
        refunds + [value for value, _ in bad.values()])
    assert not (tmp_path / "dead" / "sensor_readings").exists() or not list((tmp_path / "dead" / "sensor_readings").rglob("*.parquet"))
