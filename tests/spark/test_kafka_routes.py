"""One Kafka topic, several datasets, routed by registry schema (glue_jobs/decoding/schema_routes.py, KafkaRouter in
glue_jobs/kafka_job.py, glue_jobs/routed_batch.py): frames as Spark's Kafka source delivers them, the registry moto's
Glue Schema Registry, the frames decoded by the JVM decoder. Two datasets added as files only (page views and sensor
readings, v1 and v2 of each), frames of a schema no dataset is bound to, of an id the registry does not hold, of a
version newer than the deployed dataset, and values that are no frame.

The default Spark line only (moto is in its venv): the real broker's run of the same path is tests/spark/test_kafka_job.py's.
"""

from __future__ import annotations

import base64
import io
import json
import uuid
from pathlib import Path

import pytest

moto = pytest.importorskip("moto")
fastavro = pytest.importorskip("fastavro")

from glue_jobs import datasets  # noqa: E402
from glue_jobs.decoding.registry_frames import ZLIB, FrameDecoding, RegistryVersions, frame, function_name  # noqa: E402
from glue_jobs.decoding.routes import RouteError  # noqa: E402
from glue_jobs.decoding.schema_routes import SchemaOwners, SchemaRoutes  # noqa: E402
from glue_jobs.kafka_job import KafkaRouter  # noqa: E402
from glue_jobs.routed_batch import DatasetTarget, RoutedWriter  # noqa: E402
from glue_jobs.schema import spark_dead_letter_schema  # noqa: E402

from .routing_support import page_view, reading, write_routed_datasets  # noqa: E402
from .test_registry_frames import kafka_frame  # noqa: E402

REGISTRY = "routed"
BINDINGS = {"page-views": "page_views", "readings": "sensor_readings"}
NOW = 1_700_000_000.0
ADDED = {"page_views": {"name": "campaign", "type": ["null", "string"], "default": None},
         "sensor_readings": {"name": "note", "type": ["null", "string"], "default": None}}


def _commit_v2(root: Path, name: str) -> dict:
    """Version 2 of a dataset, committed as a team would: an optional field added, the lock updated."""
    folder = root / name
    v2 = json.loads((folder / "schema.v1.avsc").read_text())
    v2["fields"].append(ADDED[name])
    text = json.dumps(v2).encode()
    (folder / "schema.v2.avsc").write_bytes(text)
    lock = json.loads((folder / "schemas.lock.json").read_text())
    (folder / "schemas.lock.json").write_text(json.dumps({**lock, "schema.v2.avsc": datasets.file_digest(text)}))
    return v2


def _body(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.fixture
def topic(tmp_path, monkeypatch):
    """Datasets page_views and sensor_readings with v1 and v2 committed, both versions of each registered; a third
    schema, `refunds`, registered in the same registry and bound to no dataset. Yields the glue client, the
    version ids and the schemas."""
    root = write_routed_datasets(tmp_path / "team")
    schemas = {name: {1: json.loads((root / name / "schema.v1.avsc").read_text()), 2: _commit_v2(root, name)}
               for name in BINDINGS.values()}
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(root))
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    with moto.mock_aws():
        import boto3

        glue = boto3.client("glue", region_name="eu-west-1")
        glue.create_registry(RegistryName=REGISTRY)
        ids = {}
        for schema_name, name in BINDINGS.items():
            dataset = datasets.load(name)
            ids[name, 1] = glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=schema_name, DataFormat="AVRO",
                                              Compatibility="BACKWARD", SchemaDefinition=dataset.registry_definition(1))["SchemaVersionId"]
            ids[name, 2] = glue.register_schema_version(SchemaId={"RegistryName": REGISTRY, "SchemaName": schema_name},
                                                        SchemaDefinition=dataset.registry_definition(2))["SchemaVersionId"]
        refund = {"type": "record", "name": "Refund", "fields": [{"name": "event_id", "type": "string"}]}
        ids["refunds", 1] = glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName="refunds", DataFormat="AVRO",
                                               Compatibility="BACKWARD", SchemaDefinition=json.dumps(refund))["SchemaVersionId"]
        yield glue, ids, {**schemas, "refunds": {1: refund}}


def _writer(spark, tmp_path: Path, glue, routes: SchemaRoutes) -> RoutedWriter:
    versions = {name: RegistryVersions(glue, registry_name=REGISTRY, schema_name=routes.schema_of(name), dataset=datasets.load(name))
                for name in routes.datasets}
    for found in versions.values():
        found.load()
    decodings = {name: FrameDecoding(spark, datasets.load(name), versions[name], name=function_name(f"events_{name}"))
                 for name in routes.datasets}
    router = KafkaRouter(SchemaOwners.loaded(glue, routes, versions), decodings, "events")
    targets = {name: DatasetTarget(str(tmp_path / "lake" / name), str(tmp_path / "dead" / name)) for name in routes.datasets}
    return RoutedWriter(spark, source_name="events", routes=routes, targets=targets, dead_letter_path=str(tmp_path / "dead" / "unroutable"),
                        checkpoint_path=str(tmp_path / "cp"), clock=lambda: NOW, stream_id="abcd1234", router=router)


def _dead(spark, folder: Path) -> list[tuple]:
    rows = spark.read.schema(spark_dead_letter_schema()).parquet(str(folder)).collect()
    return sorted((r.source_offset, r.reason, r.detail, r.payload) for r in rows)


def _event_ids(spark, folder: Path) -> list[str]:
    return sorted(r.event_id for r in spark.read.parquet(str(folder)).select("event_id").collect())


def test_each_frame_goes_to_the_dataset_of_its_schema_and_the_rest_are_the_sources_dead_letters(spark, tmp_path, topic):
    glue, ids, schemas = topic
    routes = SchemaRoutes.of(REGISTRY, BINDINGS)
    pv, rd = (lambda n, **c: json.loads(page_view(n, **c))), (lambda n, **c: json.loads(reading(n, **c)))
    # v3 of readings, registered after the deploy (the job's files stop at v2): its dataset's own dead letter.
    v3 = {**schemas["sensor_readings"][2], "fields": [*schemas["sensor_readings"][2]["fields"],
                                                      {"name": "unit", "type": ["null", "string"], "default": None}]}
    ids["sensor_readings", 3] = glue.register_schema_version(SchemaId={"RegistryName": REGISTRY, "SchemaName": "readings"},
                                                              SchemaDefinition=json.dumps(v3))["SchemaVersionId"]
    stranger = str(uuid.uuid4())
    values = [
        frame(ids["page_views", 1], _body(schemas["page_views"][1], pv("p1"))),
        frame(ids["page_views", 2], _body(schemas["page_views"][2], pv("p2", campaign="winter"))),
        frame(ids["sensor_readings", 1], _body(schemas["sensor_readings"][1], rd("r1")), compression=ZLIB),
        frame(ids["sensor_readings", 2], _body(schemas["sensor_readings"][2], rd("r2", note="recalibrated"))),
        frame(ids["sensor_readings", 2], _body(schemas["sensor_readings"][2], rd("r3", value=900.0, note=None))),  # out of range
        frame(ids["sensor_readings", 3], _body(v3, rd("r4", note=None, unit="C"))),
        frame(ids["refunds", 1], _body(schemas["refunds"][1], {"event_id": "x1"})),
        frame(stranger, b"\x02x2"),
        b"\x03\x00short",
        None,
        frame(ids["page_views", 1], _body(schemas["page_views"][1], pv("p1"))),  # a copy of p1: collapsed
    ]
    every = _writer(spark, tmp_path, glue, routes)(kafka_frame(spark, values), 0)

    assert [(s.dataset, s.records_in, s.records_written, s.dead_letters, s.duplicates_collapsed) for s in every] == [
        ("page_views", 3, 2, 0, 1), ("sensor_readings", 4, 2, 2, 0), ("", 4, 0, 4, 0)]
    assert sum(s.records_in for s in every) == len(values)
    assert _event_ids(spark, tmp_path / "lake" / "page_views") == ["p1", "p2"]
    assert _event_ids(spark, tmp_path / "lake" / "sensor_readings") == ["r1", "r2"]
    readings_dead = _dead(spark, tmp_path / "dead" / "sensor_readings")
    assert [(offset, reason) for offset, reason, _, _ in readings_dead] == [("4", "out_of_range"), ("5", "unknown_schema_version")]
    assert "version 3 of the registry schema, newer than the deployed dataset" in readings_dead[1][2]

    bound = "(registry routed: page-views (page_views), readings (sensor_readings))"
    unroutable = _dead(spark, tmp_path / "dead" / "unroutable")
    assert [(offset, reason, detail) for offset, reason, detail, _ in unroutable] == [
        ("6", "unroutable", f"schema version {ids['refunds', 1]} is a version of "
                            f"arn:aws:glue:eu-west-1:123456789012:schema/routed/refunds, which no dataset on the topic is bound to {bound}"),
        ("7", "unroutable", f"schema version {stranger} is not in the registry {bound}"),
        ("8", "malformed_record", "the value is 7 bytes, shorter than the 18-byte Glue Schema Registry header"),
        ("9", "malformed_record", "the record has no value (a null value or tombstone)"),
    ]
    assert [base64.b64decode(payload) if payload else None for _, _, _, payload in unroutable] == [values[6], values[7], values[8], None]


def test_a_dataset_bound_between_a_crash_and_the_replay_gets_none_of_the_partly_committed_batch(spark, tmp_path, topic):
    """Bound to page views only, batch 3 crashes with the unroutable part committed and the page views' not (the
    state the crash point after_route leaves). Readings are bound before the replay: the replay routes batch 3 as it
    was first routed, so the reading committed as an unroutable dead letter is not also in the readings' lake; the
    next batch takes the new binding."""
    glue, ids, schemas = topic
    values = [frame(ids["page_views", 1], _body(schemas["page_views"][1], json.loads(page_view("p1")))),
              frame(ids["sensor_readings", 1], _body(schemas["sensor_readings"][1], json.loads(reading("r1"))))]
    first = _writer(spark, tmp_path, glue, SchemaRoutes.of(REGISTRY, {"page-views": "page_views"}))(kafka_frame(spark, values), 3)
    assert [(s.dataset, s.records_in) for s in first] == [("page_views", 1), ("", 1)]
    (tmp_path / "cp" / "_routes" / "page_views" / "_streamlake" / "batch-0000000003.committed.json").unlink()
    for path in (tmp_path / "lake" / "page_views").rglob("*.parquet"):
        path.unlink()

    both = _writer(spark, tmp_path, glue, SchemaRoutes.of(REGISTRY, BINDINGS))
    again = both(kafka_frame(spark, values), 3)
    assert [(s.dataset, s.records_in, s.replayed) for s in again] == [
        ("page_views", 1, False), ("sensor_readings", 0, False), ("", 1, True)]
    assert not list((tmp_path / "lake" / "sensor_readings").rglob("*.parquet"))
    later = both(kafka_frame(spark, [values[1]], first_offset=2), 4)
    assert [(s.dataset, s.records_written) for s in later] == [("page_views", 0), ("sensor_readings", 1), ("", 0)]


@pytest.mark.parametrize(("registry", "routes", "message"), [
    ("routed registry", {"a": "page_views"}, "registry: 'routed registry' is not a Schema Registry name"),
    ("routed", {}, "schemas: must bind at least one registry schema"),
    ("routed", {"a": "page_views", "b": "page_views"}, "schemas a and b are both bound to dataset page_views"),
    ("routed", {"a": "unroutable"}, "'unroutable' is reserved"),
])
def test_schema_routes_that_cannot_route_are_refused_naming_the_key(registry, routes, message):
    with pytest.raises(RouteError, match=message.replace("(", r"\(")):
        SchemaRoutes.of(registry, routes)


def test_the_route_field_the_stack_writes_is_the_one_the_router_records():
    """job_arguments.ROUTED_BY_SCHEMA (what the stack writes as a Kafka source's `route_field` and the entrypoint checks)
    and schema_routes.FIELD (what the router records with the checkpoint) are one text, written in both modules because a
    decoding stage does not import the job's argument contract."""
    from glue_jobs.decoding.schema_routes import FIELD
    from glue_jobs.job_arguments import ROUTED_BY_SCHEMA

    assert FIELD == ROUTED_BY_SCHEMA == SchemaRoutes.of("r", {"s": "orders"}).field
