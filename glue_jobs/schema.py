"""The event schema, read once from glue_jobs/schemas/event.avsc; everything else is derived from it.

The schema is package data, read with importlib.resources: Glue imports the package from the
`--extra-py-files` zip in place (the zip is on sys.path, nothing is extracted), where a path built from
`__file__` points inside the zip and cannot be opened. Derived here: the contract fields (for validation), the Glue Schema Registry definition, the Data
Catalog columns of the lake and source tables, and the Spark schemas the jobs read and write with.
pyspark is imported lazily so the CDK app can use the Glue column lists without a JVM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

# Package data of glue_jobs: the file the zip carries is the file the source tree holds.
SCHEMA_RESOURCE = ("glue_jobs", "schemas", "event.avsc")

# Avro primitive -> (Glue/Hive column type, Spark type name)
_AVRO_TYPES = {
    "string": ("string", "string"),
    "long": ("bigint", "long"),
    "int": ("int", "integer"),
    "double": ("double", "double"),
    "float": ("float", "float"),
    "boolean": ("boolean", "boolean"),
}

# Stored types that differ from the wire type (event_time arrives as epoch ms, is stored as a timestamp).
_STORED_OVERRIDES = {"event_time": ("timestamp", "timestamp")}

# Ingestion metadata every lake row carries (DESIGN.md "Lake layout").
INGESTION_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("source", "string", "string"),
    ("source_partition", "string", "string"),
    ("source_offset", "string", "string"),
    ("arrival_time", "timestamp", "timestamp"),
    ("batch_id", "bigint", "long"),
)
PARTITION_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("event_date", "string", "string"),
    ("event_hour", "int", "integer"),
)
DEAD_LETTER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("payload", "string", "string"),
    ("reason", "string", "string"),
    ("detail", "string", "string"),
    ("source", "string", "string"),
    ("source_partition", "string", "string"),
    ("source_offset", "string", "string"),
    ("arrival_time", "timestamp", "timestamp"),
    ("batch_id", "bigint", "long"),
)
DEAD_LETTER_PARTITION_COLUMNS: tuple[tuple[str, str, str], ...] = (("ingest_date", "string", "string"),)


@dataclass(frozen=True)
class ContractField:
    name: str
    avro_type: str
    required: bool
    glue_type: str
    spark_type: str
    doc: str


SCHEMA_FILE = "/".join(SCHEMA_RESOURCE)


def schema_text() -> str:
    """The .avsc file as committed (from the source tree or from inside the deployed zip)."""
    package, folder, name = SCHEMA_RESOURCE
    return resources.files(package).joinpath(folder).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def avro_schema() -> dict:
    return json.loads(schema_text())


def avro_schema_definition() -> str:
    """The registry's SchemaDefinition: the .avsc file, compact and stable."""
    return json.dumps(avro_schema(), separators=(",", ":"), sort_keys=False)


@lru_cache(maxsize=1)
def contract_fields() -> tuple[ContractField, ...]:
    fields = []
    for f in avro_schema()["fields"]:
        avro_type = f["type"]
        required = True
        if isinstance(avro_type, list):
            non_null = [t for t in avro_type if t != "null"]
            if len(non_null) != 1 or "null" not in avro_type:
                raise ValueError(f"{SCHEMA_FILE}: field {f['name']!r}: only ['null', T] unions are supported")
            avro_type, required = non_null[0], False
        if avro_type not in _AVRO_TYPES:
            raise ValueError(f"{SCHEMA_FILE}: field {f['name']!r}: Avro type {avro_type!r} is not supported")
        glue_type, spark_type = _AVRO_TYPES[avro_type]
        fields.append(ContractField(f["name"], avro_type, required, glue_type, spark_type, f.get("doc", "")))
    return tuple(fields)


def source_columns() -> list[tuple[str, str]]:
    """Columns of the streaming source tables (wire types), as (name, Glue type)."""
    return [(f.name, f.glue_type) for f in contract_fields()]


def lake_columns() -> list[tuple[str, str]]:
    """Non-partition columns of the lake table, as (name, Glue type), in file order."""
    contract = [(f.name, _STORED_OVERRIDES.get(f.name, (f.glue_type,))[0]) for f in contract_fields()]
    return contract + [(name, glue) for name, glue, _ in INGESTION_COLUMNS]


def lake_partition_columns() -> list[tuple[str, str]]:
    return [(name, glue) for name, glue, _ in PARTITION_COLUMNS]


def dead_letter_columns() -> list[tuple[str, str]]:
    return [(name, glue) for name, glue, _ in DEAD_LETTER_COLUMNS]


def dead_letter_partition_columns() -> list[tuple[str, str]]:
    return [(name, glue) for name, glue, _ in DEAD_LETTER_PARTITION_COLUMNS]


def _spark_struct(columns):
    from pyspark.sql import types as T

    names = {
        "string": T.StringType(), "long": T.LongType(), "integer": T.IntegerType(), "double": T.DoubleType(),
        "float": T.FloatType(), "boolean": T.BooleanType(), "timestamp": T.TimestampType(),
    }
    return T.StructType([T.StructField(name, names[spark], True) for name, spark in columns])


def spark_lake_schema():
    """Spark schema of a lake row including the partition columns, in the order files hold them."""
    contract = [(f.name, _STORED_OVERRIDES.get(f.name, (None, f.spark_type))[1]) for f in contract_fields()]
    rest = [(n, s) for n, _, s in INGESTION_COLUMNS + PARTITION_COLUMNS]
    return _spark_struct(contract + rest)


def spark_source_schema():
    """Spark schema of a decoded source record (wire types), e.g. the Avro columns from MSK."""
    return _spark_struct([(f.name, f.spark_type) for f in contract_fields()])


def spark_dead_letter_schema():
    return _spark_struct([(n, s) for n, _, s in DEAD_LETTER_COLUMNS + DEAD_LETTER_PARTITION_COLUMNS])


def avro_full_name() -> str:
    """The record's fully-qualified Avro name (namespace.name): the schema's name in the Glue Schema Registry."""
    schema = avro_schema()
    return f"{schema['namespace']}.{schema['name']}" if schema.get("namespace") else schema["name"]
