"""One schema, three consumers: the registry, the catalog columns and the Spark schema are all generated
from clickstream's committed versions datasets/clickstream/schema.v<N>.avsc and agree on field names, types and
order; committed versions never change, and each is compatible with the ones before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.template_sources import job_sources, source_arguments
from glue_jobs import datasets, schema

# Read by path here, not through glue_jobs.schema, so the check does not share the code it checks.
SCHEMA_DIR = Path(__file__).resolve().parents[2] / "datasets" / "clickstream"
# sha256 of each committed version: a registered version is immutable (AWS::Glue::SchemaVersion's
# SchemaDefinition is create-only), so its file must never change. A new version adds its line here (and its
# digest to the dataset's schemas.lock.json, which glue_jobs.datasets checks).
COMMITTED_DIGESTS = {
    1: "b6abd24071f3d537d3011a02197529c23e0907e6e36ad79be6a4a458019f4857",
}
SCHEMA_FILE = SCHEMA_DIR / f"schema.v{max(COMMITTED_DIGESTS)}.avsc"  # the newest: what the code uses

# The type correspondence this project relies on, stated once here as the check (not imported).
AVRO_TO_GLUE = {"string": "string", "long": "bigint", "int": "int", "double": "double", "float": "float", "boolean": "boolean"}
GLUE_TO_SPARK = {"string": "string", "bigint": "bigint", "int": "int", "double": "double", "float": "float",
                 "boolean": "boolean", "timestamp": "timestamp"}


def _avsc_fields() -> list[tuple[str, str]]:
    raw = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    fields = []
    for f in raw["fields"]:
        t = f["type"]
        fields.append((f["name"], next(x for x in t if x != "null") if isinstance(t, list) else t))
    return fields


def _stored(column: tuple[str, str]) -> tuple[str, str]:
    name, glue_type = column
    return (name, "timestamp") if name == "event_time" else (name, glue_type)


def _table_columns(template: dict, table_name: str) -> list[tuple[str, str]]:
    (table,) = [r for r in template["Resources"].values()
                if r["Type"] == "AWS::Glue::Table" and r["Properties"]["TableInput"]["Name"] == table_name]
    descriptor = table["Properties"]["TableInput"]["StorageDescriptor"]
    return [(c["Name"], c["Type"]) for c in descriptor["Columns"]]


def _spark(struct) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in struct.fields]


def test_committed_versions_never_change_and_the_newest_is_the_codes_schema():
    import hashlib

    files = sorted(p.name for p in SCHEMA_DIR.glob("*.avsc"))
    assert files == [f"schema.v{n}.avsc" for n in sorted(COMMITTED_DIGESTS)]
    for number, digest in COMMITTED_DIGESTS.items():
        assert hashlib.sha256((SCHEMA_DIR / f"schema.v{number}.avsc").read_bytes()).hexdigest() == digest, number
    lock = json.loads((SCHEMA_DIR / datasets.LOCK_FILE).read_text(encoding="utf-8"))
    assert lock == {f"schema.v{n}.avsc": digest for n, digest in COMMITTED_DIGESTS.items()}
    assert schema.schema_versions() == tuple(sorted(COMMITTED_DIGESTS))
    assert schema.avro_schema() == json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def test_each_version_is_compatible_with_the_latest_before_it_and_the_checkpoint():
    from operations import avro_compat

    versions = [avro_compat.parse((SCHEMA_DIR / f"schema.v{n}.avsc").read_text(encoding="utf-8"), where=f"v{n}")
                for n in sorted(COMMITTED_DIGESTS)]
    for index in range(1, len(versions)):
        assert avro_compat.evolution_problems("BACKWARD", versions[index], versions[:index]) == [], index + 1


def test_registry_holds_every_committed_version_and_no_table_pins_one(templates):
    resources = templates["prod"]["Resources"].values()
    (definition,) = {r["Properties"]["SchemaDefinition"] for r in resources if r["Type"] == "AWS::Glue::Schema"
                     and r["Properties"]["Name"] == "com.streamlake.events.Event"}
    assert json.loads(definition) == json.loads((SCHEMA_DIR / "schema.v1.avsc").read_text(encoding="utf-8"))
    later = [json.loads(r["Properties"]["SchemaDefinition"]) for r in resources if r["Type"] == "AWS::Glue::SchemaVersion"
             and "EventSchema" in json.dumps(r["Properties"]["Schema"])]
    assert later == [json.loads((SCHEMA_DIR / f"schema.v{n}.avsc").read_text(encoding="utf-8"))
                     for n in sorted(COMMITTED_DIGESTS)[1:]]
    # The Kafka job reads the topic itself and looks the versions up by number at start (docs/kafka.md): no table
    # pins a registry version, and the job is told the dataset's registry schema.
    assert not [r for r in resources if r["Type"] == "AWS::Glue::Table"
                and "SchemaReference" in r["Properties"]["TableInput"]["StorageDescriptor"]]
    (kafka_job,) = [r for r in resources if r["Type"] == "AWS::Glue::Job" and "--sources" in r["Properties"]["DefaultArguments"]
                    and any(s["source_type"] == "kafka" for s in job_sources(r["Properties"]["DefaultArguments"]))]
    (kafka_args,) = source_arguments(kafka_job["Properties"]["DefaultArguments"])
    assert kafka_args["--schema_name"] == "com.streamlake.orders.Order"
    assert kafka_args["--dataset_digest"] == datasets.load("orders").digest


def test_catalog_columns_follow_the_avsc_fields_in_order(templates):
    wire = [(name, AVRO_TO_GLUE[t]) for name, t in _avsc_fields()]
    template = templates["prod"]
    assert _table_columns(template, "source_clickstream") == wire
    lake = _table_columns(template, "events")
    assert lake[: len(wire)] == [_stored(c) for c in wire]
    assert lake[len(wire):] == [(n, g) for n, g, _ in schema.INGESTION_COLUMNS]


def test_spark_schemas_match_the_catalog_columns():
    pytest.importorskip("pyspark")
    wire = [(name, AVRO_TO_GLUE[t]) for name, t in _avsc_fields()]
    assert _spark(schema.spark_source_schema()) == [(n, GLUE_TO_SPARK[g]) for n, g in wire]
    lake_with_partitions = schema.lake_columns() + schema.lake_partition_columns()
    assert _spark(schema.spark_lake_schema()) == [(n, GLUE_TO_SPARK[g]) for n, g in lake_with_partitions]
    dead = schema.dead_letter_columns() + schema.dead_letter_partition_columns()
    assert _spark(schema.spark_dead_letter_schema()) == [(n, GLUE_TO_SPARK[g]) for n, g in dead]


def test_dead_letters_keep_payload_and_reason_as_strings():
    assert {("payload", "string"), ("reason", "string")} <= set(schema.dead_letter_columns())
