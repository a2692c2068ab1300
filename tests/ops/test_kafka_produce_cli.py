"""`python -m operations produce --dataset orders` to an MSK source, as a separate process: the stack's outputs and the
registry on a moto server, the topic on a real broker (tests/conftest.py), the records read back with librdkafka
and decoded with fastavro (readers the project did not write).

The environment is the shipped config's dev with an MSK source (mode existing): `produce` finds the topic, the
brokers and the registry schema in the stack outputs, looks the newest version up, and sends. Auth is `none`: the
local broker has no IAM (what the IAM token is: tests/ops/test_kafka_producer.py)."""

from __future__ import annotations

import base64
import copy
import io
import json
import uuid
from decimal import Decimal

import pytest
import requests

from glue_jobs import datasets
from infra.config import DEFAULT_CONFIG_PATH
from tests.ops import moto_dev_env as dev_env
from tests.ops.conftest import Deployed, _streaming_runs_stay_up
from tests.ops.test_kafka_producer import ORDER

confluent_kafka = pytest.importorskip("confluent_kafka")
fastavro = pytest.importorskip("fastavro")

REGISTRY = "streamlake-dev"
SCHEMA = "com.streamlake.orders.Order"
PAGE_VIEWS_SCHEMA = datasets.load("page_views").avro_full_name
ROUTED = ("orders", "page_views")  # kafka_env's param for a routed topic


@pytest.fixture
def orders():
    return datasets.load("orders")


@pytest.fixture
def kafka_env(moto_server, broker, tmp_path, request):
    """dev with its orders source on MSK: a config file, the stack's outputs and registry, and a topic of its own.
    `request.param` (indirect): the config's msk.partition_groups (default null: one job reads the topic), or ROUTED:
    the topic carries orders and page_views (msk.datasets), each framed with its own registry schema."""
    param = getattr(request, "param", None)
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    dev = raw["environments"]["dev"]
    dev["kinesis_streams"] = [s for s in dev["kinesis_streams"] if s["name"] == "clickstream"]
    dev["msk"] = {"mode": "existing", "bootstrap_servers": "b-1.lake.kafka.eu-west-1.amazonaws.com:9098",
                  "cluster_arn": "arn:aws:kafka:eu-west-1:123456789012:cluster/lake/0a1b2c3d-1111-2222-3333-444455556666-2",
                  "partition_groups": None if param == ROUTED else param}
    if param == ROUTED:
        dev["msk"] |= {"dataset": None, "datasets": list(ROUTED)}
    dev.pop("streaming_jobs")  # its shared job names source orders, which partition groups split in two
    config = tmp_path / "environments.json"
    config.write_text(json.dumps(raw))

    requests.post(f"{moto_server}/moto-api/reset", timeout=10)
    _streaming_runs_stay_up()
    deployed = Deployed(moto_server)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    outputs = copy.deepcopy(dev_env.OUTPUTS) | {
        "SchemaNameOrders": SCHEMA, "SchemaNamePageViews": PAGE_VIEWS_SCHEMA, "MskTopicName": topic,
        "MskBootstrapServers": broker.bootstrap_servers,
        "DeadLetterPathOrders": "s3://streamlake-dev-dead-letters/dead_letters/orders"}
    dev_env.deploy(deployed.session, endpoint_url=moto_server, outputs=outputs)
    glue = deployed.client("glue")
    version_id = glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=SCHEMA, DataFormat="AVRO",
                                    Compatibility="BACKWARD",
                                    SchemaDefinition=datasets.load("orders").registry_definition(1))["SchemaVersionId"]
    glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=PAGE_VIEWS_SCHEMA, DataFormat="AVRO",
                       Compatibility="BACKWARD", SchemaDefinition=datasets.load("page_views").registry_definition(1))
    broker.create_topic(topic, 2)
    return deployed, config, topic, version_id


def _produce(kafka_env, *args):
    deployed, config, _, _ = kafka_env
    return deployed.cli("produce", "--environment", "dev", "--config", str(config), *args)


def _read_topic(broker, topic: str, count: int) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": uuid.uuid4().hex,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    messages = []
    try:
        for _ in range(200):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
            if len(messages) >= count:
                extra = consumer.poll(2)  # nothing more than expected arrives
                assert extra is None or extra.error() is not None, "more records on the topic than were sent"
                break
    finally:
        consumer.close()
    return messages


def _decode(orders, value: bytes) -> dict:
    return fastavro.schemaless_reader(io.BytesIO(value[18:]), fastavro.parse_schema(orders.avro()), None)


@pytest.mark.parametrize("kafka_env", [None, [[0, 1, 2], [3, 4, 5]]], ids=["one-job", "two-partition-groups"],
                         indirect=True)
def test_produce_frames_a_file_with_the_newest_registered_version_and_keys_by_the_dataset_key(kafka_env, broker, orders, tmp_path):
    """With partition groups two sources carry orders (orders-p0, orders-p1): both read the one topic, so
    `--dataset orders` sends there all the same."""
    _, _, topic, version_id = kafka_env
    lines = [{**ORDER, "order_id": f"o-{i}", "total": 10 + i / 4} for i in range(6)]
    path = tmp_path / "orders.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")

    result = _produce(kafka_env, "--dataset", "orders", "--file", str(path), "--kafka-auth", "none")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"sent 6 of 6 records to topic {topic} (partitions [")
    assert result.stdout.rstrip().endswith(f"as dataset orders v1 ({version_id})")
    messages = _read_topic(broker, topic, 6)
    assert {m.value()[:18] for m in messages} == {b"\x03\x00" + uuid.UUID(version_id).bytes}
    decoded = {m.key(): _decode(orders, m.value()) for m in messages}
    assert sorted(decoded) == [f"o-{i}".encode() for i in range(6)]
    assert [decoded[f"o-{i}".encode()]["total"] for i in range(6)] == [Decimal(10 + i / 4).quantize(Decimal("0.01")) for i in range(6)]


@pytest.mark.parametrize("kafka_env", [ROUTED], ids=["routed"], indirect=True)
def test_a_routed_topics_mix_is_sent_one_dataset_at_a_time_each_framed_with_its_own_schema(kafka_env, broker, orders, tmp_path):
    """A topic carrying orders and page_views (msk.datasets): `--source orders --dataset D` frames D's records with D's
    newest registered version; without --dataset the topic is refused naming its datasets, as is a dataset it does not
    carry or --dataset beside a Kinesis stream."""
    deployed, _, topic, orders_version = kafka_env
    page_views = datasets.load("page_views")
    views_version = deployed.client("glue").get_schema_version(
        SchemaId={"RegistryName": REGISTRY, "SchemaName": PAGE_VIEWS_SCHEMA}, SchemaVersionNumber={"LatestVersion": True})["SchemaVersionId"]
    from datetime import datetime, timezone

    from glue_jobs.dataset_generate import RecordMaker

    files = {"orders": [{**ORDER, "order_id": f"o-{i}"} for i in range(3)],
             "page_views": [RecordMaker(page_views, 5).valid(i, datetime.now(timezone.utc)) for i in range(4)]}
    for name, lines in files.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
        result = _produce(kafka_env, "--source", "orders", "--dataset", name, "--file", str(path), "--kafka-auth", "none")
        assert result.returncode == 0, result.stderr
        assert f"sent {len(lines)} of {len(lines)} records to topic {topic}" in result.stdout and f"as dataset {name} v" in result.stdout
    messages = _read_topic(broker, topic, 7)
    by_version = {}
    for m in messages:
        by_version.setdefault(str(uuid.UUID(bytes=m.value()[2:18])), []).append(m.value())
    assert {version: len(values) for version, values in by_version.items()} == {orders_version: 3, views_version: 4}
    assert sorted(_decode(orders, v)["order_id"] for v in by_version[orders_version]) == ["o-0", "o-1", "o-2"]
    views = [fastavro.schemaless_reader(io.BytesIO(v[18:]), fastavro.parse_schema(page_views.avro()), None)
             for v in by_version[views_version]]
    assert sorted(v[page_views.key[0]] for v in views) == sorted(line[page_views.key[0]] for line in files["page_views"])
    path = tmp_path / "orders.jsonl"
    for args, message in (
            (("--source", "orders"), "source 'orders' is a routed MSK topic carrying orders, page_views: pass --dataset too"),
            (("--source", "orders", "--dataset", "checkouts"), "--dataset 'checkouts' is not carried by source 'orders'"),
            (("--source", "clickstream", "--dataset", "clickstream"), "--dataset with --source: only for a routed MSK topic")):
        refused = _produce(kafka_env, *args, "--file", str(path), "--kafka-auth", "none")
        assert refused.returncode != 0 and message in refused.stderr, refused.stderr
    assert len(_read_topic(broker, topic, 7)) == 7  # nothing more was sent (it polls for an eighth)


def test_dead_letters_replay_json_encoded_and_frames_unchanged(kafka_env, broker, orders, tmp_path):
    """A contract failure's payload is the record's JSON: encoded again with the newest version. An
    unknown_schema_version dead letter holds the frame's bytes (base64): they go back as they were, for the job to
    decode once the version is deployed. --reason narrows the replay."""
    _, _, topic, version_id = kafka_env
    from operations.kafka_producer import AvroFramer

    _, frame = AvroFramer(orders, version_id).frame(json.dumps({**ORDER, "order_id": "o-frame"}), "x")
    letters = tmp_path / "dead.jsonl"
    letters.write_text("\n".join(json.dumps(row) for row in [
        {"payload": json.dumps({**ORDER, "order_id": "o-json"}), "reason": "out_of_range", "detail": "total"},
        {"payload": base64.b64encode(frame).decode(), "reason": "unknown_schema_version", "detail": "v9"},
        {"payload": "not even json", "reason": "malformed_json", "detail": "left out by --reason"},
    ]) + "\n")

    result = _produce(kafka_env, "--dataset", "orders", "--dead-letters", str(letters), "--reason", "out_of_range",
                      "--reason", "unknown_schema_version", "--kafka-auth", "none")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"sent 2 of 2 records to topic {topic}")
    messages = _read_topic(broker, topic, 2)
    by_key = {m.key(): m.value() for m in messages}
    assert by_key[None] == frame  # the frame, byte for byte
    assert _decode(orders, by_key[b"o-json"])["order_id"] == "o-json"


def test_a_registry_ahead_of_the_checkout_or_without_the_schema_is_refused_and_nothing_is_sent(kafka_env, broker, orders, tmp_path):
    deployed, _, topic, _ = kafka_env
    path = tmp_path / "orders.jsonl"
    path.write_text(json.dumps(ORDER) + "\n")
    v2 = orders.avro(1) | {"fields": [*orders.avro(1)["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
    deployed.client("glue").register_schema_version(SchemaId={"RegistryName": REGISTRY, "SchemaName": SCHEMA},
                                                    SchemaDefinition=json.dumps(v2))

    ahead = _produce(kafka_env, "--dataset", "orders", "--file", str(path), "--kafka-auth", "none")

    assert ahead.returncode == 1
    assert (f"error: the registry holds v2 of {SCHEMA}, this checkout's datasets/orders ends at v1: update the "
            "checkout") in ahead.stderr
    deployed.client("glue").delete_schema(SchemaId={"RegistryName": REGISTRY, "SchemaName": SCHEMA})
    missing = _produce(kafka_env, "--dataset", "orders", "--file", str(path), "--kafka-auth", "none")
    assert missing.returncode == 1
    assert f"error: registry schema {REGISTRY}/{SCHEMA} does not exist: deploy the environment first" in missing.stderr
    assert _read_topic(broker, topic, 0) == []


def test_records_no_broker_confirmed_go_to_the_unsent_file_and_are_sent_from_it(kafka_env, broker, orders, tmp_path):
    _, _, topic, _ = kafka_env
    path = tmp_path / "orders.jsonl"
    path.write_text("\n".join(json.dumps({**ORDER, "order_id": f"o-{i}"}) for i in range(3)) + "\n")
    unsent = tmp_path / "unsent.jsonl"

    down = _produce(kafka_env, "--dataset", "orders", "--file", str(path), "--kafka-auth", "none",
                    "--bootstrap-servers", "127.0.0.1:1", "--timeout-seconds", "2", "--unsent-file", str(unsent))

    assert down.returncode == 1
    assert "sent 0 of 3 records" in down.stdout and f"3 not confirmed (first: {path} line 1: " in down.stdout
    assert [json.loads(r)["reason"] for r in unsent.read_text().splitlines()] == ["not_sent"] * 3
    again = _produce(kafka_env, "--dataset", "orders", "--dead-letters", str(unsent), "--kafka-auth", "none")
    assert again.returncode == 0, again.stderr
    assert sorted(m.key() for m in _read_topic(broker, topic, 3)) == [b"o-0", b"o-1", b"o-2"]


def test_options_of_the_other_source_kind_are_refused(kafka_env, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(ORDER) + "\n")
    checks = [
        (("--source", "clickstream", "--file", str(path), "--kafka-auth", "none"),
         "--kafka-auth: only for MSK sources; --source 'clickstream' is a Kinesis stream"),
        (("--dataset", "orders", "--file", str(path), "--max-attempts", "3", "--kafka-auth", "none"),
         "--max-attempts: only for Kinesis sources; --source 'orders' is the MSK topic"),
        (("--dataset", "payments", "--file", str(path)), "argument --dataset: 'payments' is not a dataset (datasets: checkouts, clickstream, orders, page_views)"),
    ]
    for args, message in checks:
        result = _produce(kafka_env, *args)
        assert result.returncode in (1, 2) and message in result.stderr, result.stderr
