"""The event schema, one committed file per version; the newest is the schema the code uses.

`glue_jobs/schemas/event.v1.avsc`, `event.v2.avsc`, ...: each version is a file that never changes once
committed (tests/infra/test_schema_agreement.py pins their digests). The stack registers version 1 as
the AWS::Glue::Schema and each later one as an AWS::Glue::SchemaVersion, and pins the Kafka table to the
newest (infra/catalog.py); the job package carries every file and validates with the newest, so the
jobs and the registry cannot disagree about the schema (docs/operations.md "Schema evolution").

The files are package data, read with importlib.resources: Glue imports the package from the
`--extra-py-files` zip in place (the zip is on sys.path, nothing is extracted), where a path built from
`__file__` points inside the zip and cannot be opened. Derived here from the newest version: the
contract fields (for validation), the Glue Schema Registry definition, the Data Catalog columns of the
lake and source tables, and the Spark schemas the jobs read and write with. pyspark is imported lazily
so the CDK app can use the Glue column lists without a JVM.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

# Package data of glue_jobs: the files the zip carries are the files the source tree holds.
SCHEMA_PACKAGE, SCHEMA_FOLDER = "glue_jobs", "schemas"
_VERSION_FILE = re.compile(r"^event\.v([1-9][0-9]*)\.avsc$")

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
# An Iceberg dataset's table lives in this folder of the dataset's lake prefix (glue_jobs/iceberg_lake.py): its own
# folder, so Iceberg's orphan-file removal never reaches the Parquet files, staging or logs beside it.
ICEBERG_TABLE_FOLDER = "iceberg"
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
# Envelope every source adapter produces (DESIGN "Sources in Glue"): the batch function sees only this.
# `record` holds already-decoded columns (Avro from MSK); it is null for JSON text sources.
ENVELOPE_COLUMNS = ("payload", "record", "source", "source_partition", "source_offset", "arrival_time", "problem")
# `problem`: the reason and detail an adapter already knows a record fails with (a Kafka value that cannot be
# decoded: glue_jobs/registry_frames.py), null otherwise; it wins over the contract's checks.
PROBLEM_DDL = "struct<reason:string,detail:string>"



@dataclass(frozen=True)
class ContractField:
    name: str
    avro_type: str
    required: bool
    glue_type: str
    spark_type: str
    doc: str


def schema_file(version: int) -> str:
    return f"{SCHEMA_PACKAGE}/{SCHEMA_FOLDER}/event.v{version}.avsc"


def schema_folder():
    """The folder of the version files, inside the package (a Traversable: a directory or a zip folder)."""
    return resources.files(SCHEMA_PACKAGE).joinpath(SCHEMA_FOLDER)


def schema_file_names() -> list[str]:
    return [f"event.v{n}.avsc" for n in schema_versions()]


@lru_cache(maxsize=1)
def schema_versions() -> tuple[int, ...]:
    """The committed version numbers, 1..N without gaps (a gap or a stray event*.avsc is an error)."""
    folder = schema_folder()
    names = sorted(entry.name for entry in folder.iterdir() if entry.name.startswith("event") and entry.name.endswith(".avsc"))
    versions = []
    for name in names:
        match = _VERSION_FILE.match(name)
        if not match:
            raise ValueError(f"{SCHEMA_PACKAGE}/{SCHEMA_FOLDER}/{name}: schema files are named event.v<N>.avsc")
        versions.append(int(match.group(1)))
    versions.sort()
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"{SCHEMA_PACKAGE}/{SCHEMA_FOLDER}: schema versions must be 1..N without gaps, found {versions}")
    return tuple(versions)


def latest_version() -> int:
    return schema_versions()[-1]


def schema_text(version: int | None = None) -> str:
    """A version's .avsc file as committed (default: the newest), from the source tree or the deployed zip."""
    version = latest_version() if version is None else version
    if version not in schema_versions():
        raise ValueError(f"schema version {version} is not committed (have {list(schema_versions())})")
    return schema_folder().joinpath(f"event.v{version}.avsc").read_text(encoding="utf-8")


@cache
def avro_schema(version: int | None = None) -> dict:
    return json.loads(schema_text(version))


def avro_schema_definition(version: int | None = None) -> str:
    """The registry's SchemaDefinition of a version (default: the newest): the .avsc file, compact and stable."""
    return json.dumps(avro_schema(version), separators=(",", ":"), sort_keys=False)


@lru_cache(maxsize=1)
def contract_fields() -> tuple[ContractField, ...]:
    fields = []
    for f in avro_schema()["fields"]:
        avro_type = f["type"]
        required = True
        if isinstance(avro_type, list):
            non_null = [t for t in avro_type if t != "null"]
            if len(non_null) != 1 or "null" not in avro_type:
                raise ValueError(f"{schema_file(latest_version())}: field {f['name']!r}: only ['null', T] unions are supported")
            avro_type, required = non_null[0], False
        if avro_type not in _AVRO_TYPES:
            raise ValueError(f"{schema_file(latest_version())}: field {f['name']!r}: Avro type {avro_type!r} is not supported")
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


def envelope_schema():
    """The envelope every source adapter produces (ENVELOPE_COLUMNS); `record` holds a decoded record."""
    from pyspark.sql import types as T

    string = T.StringType()
    types = {"payload": string, "record": spark_source_schema(), "source": string, "source_partition": string,
             "source_offset": string, "arrival_time": T.TimestampType(), "problem": T.StructType([T.StructField("reason", string), T.StructField("detail", string)])}
    return T.StructType([T.StructField(name, types[name]) for name in ENVELOPE_COLUMNS])


def spark_dead_letter_schema():
    return _spark_struct([(n, s) for n, _, s in DEAD_LETTER_COLUMNS + DEAD_LETTER_PARTITION_COLUMNS])


def avro_full_name() -> str:
    """The record's fully-qualified Avro name (namespace.name): the schema's name in the Glue Schema Registry."""
    schema = avro_schema()
    return f"{schema['namespace']}.{schema['name']}" if schema.get("namespace") else schema["name"]
