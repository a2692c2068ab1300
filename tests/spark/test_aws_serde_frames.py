"""Frames written by AWS's own Schema Registry serializer (software.amazon.glue:schema-registry-serde 1.1.24, from
Maven Central, jvm/jars.lock set glue-serde) decode in the job exactly as the project's producer's frames do.

The serializer runs in its own JVM (tests/jvm/AwsSerdeFrames.java, compiled here) against a moto server as the
registry: it looks the schema version up by definition (auto-registration off) and writes the header, the UUID
and, with ZLIB, the deflated body as it does for any AWS user. Default Spark line (moto server, e2e).
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

moto_server = pytest.importorskip("moto.server")

from glue_jobs import datasets  # noqa: E402
from glue_jobs.decoding.registry_frames import FrameDecoding, RegistryVersions  # noqa: E402
from glue_jobs.lake.lake_table import LakeTable  # noqa: E402
from glue_jobs.sources import from_kafka_records  # noqa: E402
from tests.spark.test_registry_frames import NOW_MS, kafka_frame  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REGISTRY, SCHEMA = "serde", "com.streamlake.orders.Order"
SCHEMA_FILE = REPO / "datasets" / "orders" / "schema.v1.avsc"


def _aws_frames(classes: Path, endpoint: str, bodies: list[bytes], compression: str) -> tuple[str, list[bytes]]:
    """(the schema text the serializer sends, its frame of each body)."""
    from devtools.jars import classpath

    command = ["java", "-cp", f"{classes}:{classpath('glue-serde')}", "AwsSerdeFrames", endpoint, "eu-west-1", REGISTRY,
               SCHEMA, str(SCHEMA_FILE), compression]
    env = {"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = subprocess.run(command, input="".join(base64.b64encode(b).decode() + "\n" for b in bodies), env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    first, *frames = done.stdout.splitlines()
    return first, [base64.b64decode(f) for f in frames]


def test_frames_of_aws_serializer_decode_like_the_producers(spark, tmp_path, monkeypatch):
    from datetime import datetime, timedelta, timezone

    import boto3

    from devtools.jars import classpath
    from glue_jobs.dataset_generate import RecordMaker, decimal_literal
    from operations.kafka_producer import AvroFramer

    classes = tmp_path / "classes"
    javac = subprocess.run(["javac", "-d", str(classes), "-cp", classpath("glue-serde"), str(REPO / "tests/jvm/AwsSerdeFrames.java")],
                           capture_output=True, text=True, timeout=180)
    assert javac.returncode == 0, javac.stderr
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(REPO / "datasets"))
    orders = datasets.load("orders")
    maker, now = RecordMaker(orders, seed=9), datetime.fromtimestamp(NOW_MS / 1000, timezone.utc)
    texts = [decimal_literal(maker.valid(n, now - timedelta(minutes=n))) for n in range(25)]

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        glue = boto3.client("glue", endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id="testing",
                            aws_secret_access_key="testing")
        glue.create_registry(RegistryName=REGISTRY)
        # Registered as the serializer sends it (Avro's Schema.toString()), which its lookup by definition matches;
        # the job checks it against the dataset's file by content (registry_frames.canonical).
        sent_text, _ = _aws_frames(classes, endpoint, [], "NONE")
        version_id = glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=SCHEMA, DataFormat="AVRO",
                                        Compatibility="BACKWARD", SchemaDefinition=sent_text)["SchemaVersionId"]
        ours = [AvroFramer(orders, version_id).frame(text, f"record {i}")[1] for i, text in enumerate(texts)]
        bodies = [frame[18:] for frame in ours]  # fastavro's encoding, read back by the serializer's JVM
        _, plain = _aws_frames(classes, endpoint, bodies, "NONE")
        _, deflated = _aws_frames(classes, endpoint, bodies, "ZLIB")
        versions = RegistryVersions(glue, registry_name=REGISTRY, schema_name=SCHEMA, dataset=orders)
        versions.load()
    finally:
        server.stop()

    assert [f[:2] for f in plain] == [b"\x03\x00"] * 25 and [f[:2] for f in deflated] == [b"\x03\x05"] * 25
    assert {f[2:18] for f in plain + deflated} == {ours[0][2:18]}  # the same version UUID, byte for byte
    assert plain == ours  # AWS's header and Avro encoding are the producer's, byte for byte
    decoding = FrameDecoding(spark, orders, versions, name="decode_aws_serde")
    table = LakeTable.of(orders)

    def rows(values):
        validated = table.validate(from_kafka_records(kafka_frame(spark, values), "orders", decoding), now_ms=NOW_MS)
        return [r.asDict(recursive=True) for r in validated.drop("arrival_time").collect()]

    from_producer, from_aws = rows(ours), rows(deflated)
    assert [r["reason"] for r in from_aws] == [None] * 25
    assert from_aws == from_producer
    assert sorted(r["order_id"] for r in from_aws) == sorted(json.loads(t)["order_id"] for t in texts)
