"""One schema file, three consumers: the registry definition, the catalog columns and the Spark schema
are all generated from glue_jobs/schemas/event.avsc and agree on field names, types and order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from glue_jobs import schema

# Read by path here, not through glue_jobs.schema, so the check does not share the code it checks.
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "glue_jobs" / "schemas" / "event.avsc"

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


def test_registry_definition_is_the_avsc_file(templates):
    (definition,) = {r["Properties"]["SchemaDefinition"] for r in templates["prod"]["Resources"].values()
                     if r["Type"] == "AWS::Glue::Schema"}
    assert json.loads(definition) == json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


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
