"""The Kafka producer's framing and its per-record outcome (operations/kafka_producer.py), without a broker: fastavro
(a reader the project did not write) reads back what it framed, records the schema cannot hold are refused
before anything is sent, and records a broker never acknowledged land in the unsent file."""

from __future__ import annotations

import io
import json
import uuid
from decimal import Decimal

import fastavro
import pytest

from glue_jobs import datasets
from glue_jobs.decoding.registry_frames import ZLIB
from operations.errors import ToolError
from operations.kafka_producer import AvroFramer, send

VERSION = "6f1c7a52-0c55-4b7e-9d1e-2a4b8f0c1d11"
ORDER = {"order_id": "o-1", "ordered_at": "2026-11-25T10:15:00+01:00", "customer_id": "c-9", "status": "paid",
         "currency": "EUR", "total": 25.5, "items": [{"sku": "A-1", "quantity": 2, "unit_price": 12.75}],
         "shipping": {"country": "DE", "city": None, "express": True}, "coupons": {"WELCOME": 150}}


@pytest.fixture
def orders():
    return datasets.load("orders")


def test_a_record_is_framed_with_the_version_uuid_and_reads_back_exactly(orders):
    key, value = AvroFramer(orders, VERSION).frame(json.dumps(ORDER), "line 1")
    assert key == b"o-1" and value[:2] == b"\x03\x00" and uuid.UUID(bytes=value[2:18]) == uuid.UUID(VERSION)
    record = fastavro.schemaless_reader(io.BytesIO(value[18:]), fastavro.parse_schema(orders.avro()), None)
    assert record["total"] == Decimal("25.50") and record["items"][0]["unit_price"] == Decimal("12.75")
    assert record["shipping"] == {"country": "DE", "city": None, "express": True} and record["coupons"] == {"WELCOME": 150}
    _, deflated = AvroFramer(orders, VERSION, compression=ZLIB).frame(json.dumps(ORDER), "line 1")
    assert deflated[:18] == b"\x03\x05" + value[2:18]


@pytest.mark.parametrize("change,message", [
    ({"total": 12.345}, r"line 7: total: 12.345 is not a decimal\(12,2\) \(never rounded\)"),
    ({"items": [{"sku": "A", "quantity": "2", "unit_price": 1}]}, r"line 7: does not fit dataset orders v1"),
    ({"status": "lost"}, r"line 7: does not fit dataset orders v1"),
    ({"total": "25.50"}, r"line 7: total: a decimal must be a JSON number, got '25.50'"),
])
def test_a_record_the_schema_cannot_hold_is_refused_naming_its_line(orders, change, message):
    with pytest.raises(ToolError, match=message):
        AvroFramer(orders, VERSION).frame(json.dumps({**ORDER, **change}), "line 7")


def test_nothing_is_sent_when_one_record_does_not_fit(orders, tmp_path):
    lines = [("line 1", json.dumps(ORDER)), ("line 2", json.dumps({**ORDER, "total": 1.001}))]
    with pytest.raises(ToolError, match="line 2"):
        send({"bootstrap.servers": "127.0.0.1:1"}, "t", lines, AvroFramer(orders, VERSION), unsent_path=tmp_path / "u.jsonl")
    assert not (tmp_path / "u.jsonl").exists()


def test_records_no_broker_acknowledged_go_to_the_unsent_file(orders, tmp_path):
    """librdkafka reports each record it could not deliver within message.timeout.ms (no broker listens on port 1)."""
    lines = [(f"line {i}", json.dumps({**ORDER, "order_id": f"o-{i}"})) for i in range(1, 4)]
    result = send({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 1500, "enable.idempotence": False}, "t", lines,
                  AvroFramer(orders, VERSION), unsent_path=tmp_path / "unsent.jsonl", flush_seconds=20)
    assert result.sent == 0 and [where for where, _ in result.failed] == ["line 1", "line 2", "line 3"]
    unsent = [json.loads(line) for line in (tmp_path / "unsent.jsonl").read_text().splitlines()]
    assert [json.loads(u["payload"])["order_id"] for u in unsent] == ["o-1", "o-2", "o-3"]
    assert all(u["reason"] == "not_sent" and "timed out" in u["detail"].lower() for u in unsent)


def test_iam_auth_signs_a_kafka_cluster_connect_token_for_the_region_with_its_expiry_in_seconds():
    """SASL OAUTHBEARER on MSK's 9098: the token is aws-msk-iam-sasl-signer-python's presigned kafka-cluster:Connect
    request (its README), made from the default credential chain (here the tests' fake keys). confluent-kafka wants
    the expiry in seconds; the signer gives milliseconds. Unverified here: a real MSK broker accepting it."""
    import base64
    import time
    from urllib.parse import parse_qs, urlparse

    from operations.kafka_producer import client_settings

    settings = client_settings("b-1.lake.kafka.eu-west-1.amazonaws.com:9098", auth="iam", region="eu-west-1", timeout_s=30)
    assert {k: settings[k] for k in ("security.protocol", "sasl.mechanism", "message.timeout.ms")} == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "message.timeout.ms": 30_000}
    token, expiry = settings["oauth_cb"]("")
    url = urlparse(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert (url.scheme, url.netloc, query["Action"]) == ("https", "kafka.eu-west-1.amazonaws.com", "kafka-cluster:Connect")
    assert query["X-Amz-Credential"].endswith("/eu-west-1/kafka-cluster/aws4_request") and query["X-Amz-Signature"]
    assert time.time() < expiry < time.time() + 3600  # seconds, not the signer's milliseconds
    assert "oauth_cb" not in client_settings("127.0.0.1:9092", auth="none", region=None)
    with pytest.raises(ToolError, match="IAM auth to MSK signs for a region"):
        client_settings("b:9098", auth="iam", region=None)


def test_the_newest_registered_version_must_hold_the_checkouts_newest_file(orders):
    """A registry version 1 whose definition is not datasets/orders/schema.v1.avsc is refused (moto's Glue)."""
    import boto3
    from moto import mock_aws

    from operations.kafka_producer import newest_registered

    with mock_aws():
        glue = boto3.client("glue", region_name="eu-west-1")
        glue.create_registry(RegistryName="r")
        other = orders.avro(1) | {"doc": "not the committed file"}
        created = glue.create_schema(RegistryId={"RegistryName": "r"}, SchemaName="s", DataFormat="AVRO",
                                     Compatibility="BACKWARD", SchemaDefinition=json.dumps(other))
        with pytest.raises(ToolError, match=r"s: registry version 1 \(.*\) differs from datasets/orders/schema.v1.avsc: "
                                            "a committed version never changes"):
            newest_registered(glue, registry_name="r", schema_name="s", dataset=orders)
        glue.delete_schema(SchemaId={"RegistryName": "r", "SchemaName": "s"})
        created = glue.create_schema(RegistryId={"RegistryName": "r"}, SchemaName="s", DataFormat="AVRO",
                                     Compatibility="BACKWARD", SchemaDefinition=orders.registry_definition(1))
        assert newest_registered(glue, registry_name="r", schema_name="s", dataset=orders) == created["SchemaVersionId"]
