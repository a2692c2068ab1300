"""Kafka values framed by the Glue Schema Registry serializer, decoded in the JVM (glue_jobs/decoding/registry_frames.py,
jvm/glue-functions), on every Spark line.

Bodies are written by fastavro (an Avro writer the project did not write); a decoded record then meets the
dataset's contract like a JSON record, so the strongest check is that both paths store the same row.

A decode and validate costs its planning on the `strict` dataset's deep schema, not its records: the records the
`strict` tests judge are one Kafka batch per mode (`strict_batch`: the record of every type, then each REFUSED value
as a record of its own), decoded and validated in one query, each row matched back to its case by its offset.
"""

from __future__ import annotations

import io
import json
import shutil
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs import datasets
from glue_jobs.decoding.registry_frames import ZLIB, FrameDecoding, frame
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.sources import KAFKA_COLUMNS, from_kafka_records
from tests.spark.streaming_support import json_envelope, literal_frame
from tests.spark.test_typed_contract import GOOD_LEAVES, NOW_MS, _record, strict  # noqa: F401 (strict: a fixture)

V1, V2 = "6f1c7a52-0c55-4b7e-9d1e-2a4b8f0c1d11", "0b3e9a41-77f2-4c1a-8e0d-5c6b7a8f9e22"
UNKNOWN = "a0a0a0a0-1111-4222-8333-444455556666"
KAFKA_SCHEMA = T.StructType([
    T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()), T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()), T.StructField("offset", T.LongType()),
    T.StructField("timestamp", T.TimestampType()), T.StructField("timestampType", T.IntegerType()),
])
ORDER = {
    "order_id": "o-1", "ordered_at": "2026-11-25T10:15:00+01:00", "customer_id": "c-9", "status": "paid", "currency": "EUR",
    "total": Decimal("25.50"), "items": [{"sku": "A-1", "quantity": 2, "unit_price": Decimal("12.75")}],
    "shipping": {"country": "DE", "city": "Köln \"Mitte\"", "express": None}, "coupons": {"WELCOME": 150},
}
SHIPPING_V2 = {"name": "region", "type": ["null", "string"], "default": None}


def avro_body(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def kafka_frame(spark, values: list[bytes | None], *, partition: int = 0, first_offset: int = 0):
    """Rows as Spark's Kafka source delivers them (KAFKA_COLUMNS), offsets first_offset.. in order."""
    assert tuple(KAFKA_SCHEMA.fieldNames()) == KAFKA_COLUMNS
    rows = [{"value": None if v is None else bytearray(v), "topic": "orders-events", "partition": partition,
             "offset": first_offset + i, "timestampType": 0} for i, v in enumerate(values)]
    frame_ = literal_frame(spark, rows, KAFKA_SCHEMA)
    return frame_.withColumn("timestamp", F.expr("timestamp_millis(1764061200000)"))


def _envelope(spark, dataset, versions: dict[str, int], values: list[bytes | None], *, typed: bool = False):
    decoding = FrameDecoding(spark, dataset, versions, name=f"decode_{dataset.name}_test", typed_records=typed)
    return from_kafka_records(kafka_frame(spark, values), "orders", decoding)


def _decoded(spark, dataset, versions: dict[str, int], values: list[bytes | None], *, typed: bool = False):
    return LakeTable.of(dataset).validate(_envelope(spark, dataset, versions, values, typed=typed), now_ms=NOW_MS)


def _avro_record(**changes) -> dict:
    """_record's values as an Avro writer takes them (decimals, dates), with `changes` at two.rows[0]."""
    avro_record = json.loads(json.dumps(_record()))
    for leaves in (avro_record, avro_record["one"], avro_record["two"]["rows"][0]):
        leaves["m"], leaves["day"] = Decimal("12.50"), date.fromisoformat(leaves["day"])
    avro_record["two"]["rows"][0].update(changes)
    return avro_record


REPOSITORY_DATASETS = Path(__file__).resolve().parents[2] / "datasets"


@pytest.fixture
def orders(monkeypatch):
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(REPOSITORY_DATASETS))
    return datasets.load("orders")


@pytest.fixture(scope="module")
def orders_v2_root(tmp_path_factory):
    """The repository's datasets/ copied with orders v2 committed: shipping gains an optional `region` (nested)."""
    root = tmp_path_factory.mktemp("datasets") / "datasets"
    shutil.copytree(REPOSITORY_DATASETS, root)
    folder = root / "orders"
    v2 = json.loads((folder / "schema.v1.avsc").read_text())
    shipping = next(f for f in v2["fields"] if f["name"] == "shipping")
    shipping["type"][1]["fields"].append(SHIPPING_V2)
    text = json.dumps(v2).encode()
    (folder / "schema.v2.avsc").write_bytes(text)
    lock = json.loads((folder / "schemas.lock.json").read_text())
    (folder / "schemas.lock.json").write_text(json.dumps({**lock, "schema.v2.avsc": datasets.file_digest(text)}))
    return root


@pytest.fixture
def orders_v2(orders_v2_root, monkeypatch):
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(orders_v2_root))
    return datasets.load("orders")


REFUSED = [
    ("d", float("nan"), "out_of_range", "d: value out of range"),
    ("f", float("inf"), "out_of_range", "f: value out of range"),
    ("i", 51, "out_of_range", "i: value out of range (max 50)"),  # the rule at two.rows[].i
    ("m", Decimal("123456789.50"), "out_of_range", "m: value out of range"),  # 9 integer digits, decimal(10,2) holds 8
    ("s", " ", "missing_required_field", "s: required field absent, null or empty"),
    ("tags", [], None, None),  # min_items is a rule of the top-level tags only
]
REFUSED_CASES = [f"{f}={v!r}" for f, v, *_ in REFUSED]
GOOD_OFFSETS = (0, 1)  # strict_batch: the record of every type, plain then zlib; REFUSED from offset 2 in order


@pytest.fixture(scope="module")
def json_row(spark, strict):  # noqa: F811
    """The row the JSON path stores for the record of every type at every depth (one query, shared by both modes)."""
    return LakeTable.of(strict).validate(json_envelope(spark, [json.dumps(_record())]), now_ms=NOW_MS).first()


@pytest.fixture(scope="module", params=[False, True], ids=["json-rendering", "typed-record"])
def strict_batch(request, spark, strict):  # noqa: F811
    """Both ways a decoded record meets the contract (request.param: the decoder's typed records or not), over one
    Kafka batch: at GOOD_OFFSETS the record of every type at every depth (plain, zlib), then one record per REFUSED
    value. Returns (typed, the envelope's first record when typed, the validated rows by offset): one decode and
    validate query for every case of the mode."""
    typed = request.param
    body = avro_body(strict.avro(), _avro_record())
    # A bytes decimal's encoding is its unscaled integer: written with precision 20 (fastavro checks the precision,
    # Avro's reader does not), the body is what a producer that ignores the precision sends.
    writer = json.loads(json.dumps(strict.avro()).replace('"precision": 10', '"precision": 20'))
    refused = [frame(V1, avro_body(writer, _avro_record(**{field: value}))) for field, value, *_ in REFUSED]
    values = [frame(V1, body), frame(V1, body, compression=ZLIB), *refused]
    envelope = _envelope(spark, strict, {V1: 1}, values, typed=typed)
    # typed: the shortcut is taken: the envelope carries the record, typed as the contract's plain parse
    first = envelope.select("record").first().record if typed else None
    rows = {int(r.source_offset): r for r in LakeTable.of(strict).validate(envelope, now_ms=NOW_MS).collect()}
    assert sorted(rows) == list(range(len(values))), "one row per Kafka record"
    return typed, first, rows


def test_every_type_at_every_depth_decodes_to_the_row_the_json_path_stores(strict_batch, json_row):
    """Both ways a decoded record meets the contract: its JSON rendering parsed, or the decoder's typed record
    (registry_frames `typed_records`, the typed contract skipping the parse) store the row a JSON record stores
    (strict_batch's records at GOOD_OFFSETS, plain and zlib)."""
    typed, first, rows = strict_batch
    if typed:  # the shortcut is taken: the envelope carries the record, typed as the contract's plain parse
        assert first is not None and first.two.rows[0].m == Decimal("12.50") and first.two.rows[0].day == "2024-02-29"
    ingestion = ("payload", "source", "source_partition", "source_offset", "arrival_time")
    lake = [c for c in json_row.asDict() if c not in ingestion]
    kafka_rows = [{c: v for c, v in rows[offset].asDict(recursive=True).items() if c in lake} for offset in GOOD_OFFSETS]
    assert list(kafka_rows[0]) == lake, list(kafka_rows[0])
    assert kafka_rows[0]["reason"] is None, kafka_rows[0]
    assert kafka_rows == [{c: json_row.asDict(recursive=True)[c] for c in lake}] * 2


def test_a_decoded_value_the_dataset_refuses_is_a_dead_letter_naming_its_path(strict_batch):
    """Each REFUSED value, written at two.rows[0] of a record that is valid otherwise, gets its dead letter (or, tags=[],
    none) at its path, both ways; a dead letter's payload is the record's JSON. The cases are strict_batch's records
    from offset 2, compared case by case (a failure names each case that broke)."""
    _, _, rows = strict_batch
    cases = {case: rows[offset] for offset, case in enumerate(REFUSED_CASES, start=2)}
    got = {case: (row.reason, row.detail) for case, row in cases.items()}
    assert got == {case: (reason, detail and f"two.rows[0].{detail}")
                   for case, (_, _, reason, detail) in zip(REFUSED_CASES, REFUSED, strict=True)}
    # a decoded record's payload is its JSON
    payloads = {case: json.loads(row.payload)["two"]["rows"][0]["b"] for case, row in cases.items() if row.reason}
    assert payloads == {case: True for case, (_, _, reason, _) in zip(REFUSED_CASES, REFUSED, strict=True) if reason}


def test_undecodable_values_are_dead_letters_with_their_bytes_and_reason(spark, orders):
    body = avro_body(orders.avro(), ORDER)
    bad = {
        "plain JSON": b'{"order_id": "o-1"}',
        "Confluent frame": b"\x00\x00\x00\x00\x07" + body,
        "truncated header": frame(V1, body)[:10],
        "compression byte 7": b"\x03\x07" + uuid.UUID(V1).bytes + body,
        "unknown UUID": frame(UNKNOWN, body),
        "body cut short": frame(V1, body[:-3]),
        "trailing bytes": frame(V1, body + b"\x00\x02"),
        "zlib stream broken": frame(V1, body, compression=ZLIB)[:-4],
        "no value": None,
        # 1d225b0 stored this as cu\ufffd(\ufffd\ufffd: Avro's Utf8.toString() replaces bytes that are not UTF-8
        "string not UTF-8": frame(V1, avro_body(orders.avro(), {**ORDER, "customer_id": "cuXXXX"})
                                  .replace(b"cuXXXX", bytes([0x63, 0x75, 0xC3, 0x28, 0xFF, 0xFE]))),
    }
    values = [frame(V1, body), *bad.values()]
    rows = _decoded(spark, orders, {V1: 1}, values).collect()
    assert rows[0].reason is None and rows[0].order_id == "o-1" and rows[0].total == Decimal("25.50")
    got = {name: (r.reason, r.detail, r.payload, r.source_partition, r.source_offset)
           for name, r in zip(bad, rows[1:], strict=True)}
    expected_details = {
        "plain JSON": "header version byte is 123, not 3",
        "Confluent frame": "a Confluent-style frame (magic byte 0)",
        "truncated header": "the value is 10 bytes, shorter than the 18-byte Glue Schema Registry header",
        "compression byte 7": "compression byte is 7, not 0 (none) or 5 (zlib)",
        "unknown UUID": f"schema version {UNKNOWN} is not a version this job can read",
        "body cut short": f"the Avro body is not a record of schema version {V1}",
        "trailing bytes": f"bytes after the end of the Avro record of schema version {V1}",
        "zlib stream broken": "zlib body cannot be inflated",
        "no value": "the record has no value",
        "string not UTF-8": f"a string of the Avro record of schema version {V1} is not valid UTF-8",
    }
    import base64

    for offset, (name, value) in enumerate(bad.items(), start=1):
        reason, detail, payload, partition, source_offset = got[name]
        assert reason == ("unknown_schema_version" if name == "unknown UUID" else "malformed_record"), name
        assert detail.startswith(expected_details[name]), (name, detail)
        assert payload == (None if value is None else base64.b64encode(value).decode()), name
        assert (partition, source_offset) == ("0", str(offset)), name


def test_a_v1_record_resolves_to_the_newest_schema_beside_a_v2_record(spark, orders_v2):
    v1 = orders_v2.avro(1)
    v2_record = {**ORDER, "order_id": "o-2", "shipping": {**ORDER["shipping"], "region": "NRW"}}
    values = [frame(V1, avro_body(v1, ORDER)), frame(V2, avro_body(orders_v2.avro(2), v2_record), compression=ZLIB)]
    rows = _decoded(spark, orders_v2, {V1: 1, V2: 2}, values).select("order_id", "shipping", "reason").collect()
    assert [(r.order_id, r.reason, r.shipping.region, r.shipping.city) for r in rows] == [
        ("o-1", None, None, "Köln \"Mitte\""), ("o-2", None, "NRW", "Köln \"Mitte\"")]


def test_a_sources_decoder_function_name_is_an_identifier_whatever_the_source_name(spark, orders):
    """Source names hold '-' (`orders-p0`, a partition group): the function name replaces them; a name that is not
    a SQL identifier is refused before Spark parses `decode_orders-p0(value)` as a subtraction."""
    from glue_jobs.decoding.registry_frames import function_name

    assert function_name("orders-p0") == "streamlake_decode_orders_p0"
    decoding = FrameDecoding(spark, orders, {}, name=function_name("orders-p0"))
    assert decoding.name == "streamlake_decode_orders_p0"
    with pytest.raises(ValueError, match="'decode_orders-p0' is not a SQL identifier"):
        FrameDecoding(spark, orders, {}, name="decode_orders-p0")


def test_the_version_id_a_routed_topic_routes_by_is_the_frames_uuid_or_null_for_a_value_that_is_no_frame(spark):
    """glue_jobs/decoding/schema_routes.version_id, on every Spark line: the registry's spelling of bytes 2-17."""
    from glue_jobs.decoding.schema_routes import version_id

    values = [frame(V1, b"body"), frame(V2.upper(), b"", compression=ZLIB), b"\x03\x00short", b"\x00" + frame(V1, b"x")[1:],
              b"\x04" + frame(V1, b"x")[1:], None]
    found = [row[0] for row in kafka_frame(spark, values).select(version_id()).orderBy("offset").collect()]
    assert found == [V1, V2, None, None, None, None]
