"""clickstream's event schema and every column list; the newest schema version is the schema the code uses.

clickstream's versions are its dataset's files, `datasets/clickstream/schema.v1.avsc`, `schema.v2.avsc`, ...,
read through glue_jobs/datasets.py (which checks each against its digest pinned in schemas.lock.json: a committed
version never changes). The stack registers version 1 as the AWS::Glue::Schema `EventSchema` and each later one
as an AWS::Glue::SchemaVersion (infra/catalog.py); the job package carries every file and validates with the
newest, so the jobs and the registry cannot disagree about the schema (docs/operations.md "Schema evolution").

glue_jobs.datasets reads with importlib.resources-style Traversables: Glue imports the package from the
`--extra-py-files` zip in place (the zip is on sys.path, nothing is extracted, `datasets/` sits beside the
packages), where a path built from `__file__` points inside the zip and cannot be opened. Derived here from
the newest version: its flat fields (the bench's bare parse), the Glue Schema Registry definition, the
Data Catalog columns of clickstream's lake and source tables, and the Spark schemas the jobs read and write
with. Nothing reads the dataset at import: a team may delete datasets/clickstream, and every job imports this
module. pyspark is imported lazily so the CDK app can use the Glue column lists without a JVM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from glue_jobs import datasets

# The dataset whose schema this module derives from: registered as the registry's EventSchema, stored in the `events`
# table (infra/catalog.py).
DATASET = "clickstream"

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
# An Iceberg dataset's table lives in this folder of the dataset's lake prefix (glue_jobs/lake/iceberg_lake.py): its own
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
# decoded: glue_jobs/decoding/registry_frames.py), null otherwise; it wins over the contract's checks.
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
    return f"datasets/{DATASET}/schema.v{version}.avsc"


def _dataset() -> datasets.Dataset:
    """The clickstream dataset, read now (glue_jobs.datasets: the source tree, the job zip or STREAMLAKE_DATASETS;
    a file edited since is read again, an unchanged one parsed once)."""
    return datasets.load(DATASET)


def schema_file_names() -> list[str]:
    return [f"schema.v{n}.avsc" for n in schema_versions()]


def schema_versions() -> tuple[int, ...]:
    """The committed version numbers, 1..N without gaps (glue_jobs.datasets refuses a gap or a stray .avsc)."""
    return _dataset().versions


def latest_version() -> int:
    return schema_versions()[-1]


def schema_text(version: int | None = None) -> str:
    """A version's .avsc file as committed (default: the newest), from the source tree or the deployed zip."""
    return _dataset().schema_text(version)


def avro_schema(version: int | None = None) -> dict:
    return json.loads(schema_text(version))


def avro_schema_definition(version: int | None = None) -> str:
    """The registry's SchemaDefinition of a version (default: the newest): the .avsc file, compact and stable."""
    return _dataset().registry_definition(version)


def contract_fields() -> tuple[ContractField, ...]:
    """The newest version's fields (flat: a primitive or ['null', primitive] each)."""
    return _contract_fields(_dataset())


@cache
def _contract_fields(dataset: datasets.Dataset) -> tuple[ContractField, ...]:
    fields = []
    where = schema_file(dataset.latest_version)
    for f in dataset.avro()["fields"]:
        avro_type = f["type"]
        required = True
        if isinstance(avro_type, list):
            non_null = [t for t in avro_type if t != "null"]
            if len(non_null) != 1 or "null" not in avro_type:
                raise ValueError(f"{where}: field {f['name']!r}: only ['null', T] unions are supported")
            avro_type, required = non_null[0], False
        if avro_type not in _AVRO_TYPES:
            raise ValueError(f"{where}: field {f['name']!r}: Avro type {avro_type!r} is not supported")
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


def source_record_type():
    """The type of the envelope's `record` where a source decodes none (JSON from Kinesis or files): a null string.
    A decoder's records have their dataset's type (glue_jobs/registry_frames.record_type), which the contract
    trusts; a null of any other type it replaces with a null of that one (glue_jobs/contract/typed_contract.py `validate`)."""
    from pyspark.sql import types as T

    return T.StringType()


def envelope_schema():
    """The envelope every source adapter produces (ENVELOPE_COLUMNS); `record` holds a decoded record."""
    from pyspark.sql import types as T

    string = T.StringType()
    types = {"payload": string, "record": source_record_type(), "source": string, "source_partition": string,
             "source_offset": string, "arrival_time": T.TimestampType(), "problem": T.StructType([T.StructField("reason", string), T.StructField("detail", string)])}
    return T.StructType([T.StructField(name, types[name]) for name in ENVELOPE_COLUMNS])


def spark_dead_letter_schema():
    return _spark_struct([(n, s) for n, _, s in DEAD_LETTER_COLUMNS + DEAD_LETTER_PARTITION_COLUMNS])


def avro_full_name() -> str:
    """The record's fully-qualified Avro name (namespace.name): the schema's name in the Glue Schema Registry."""
    return _dataset().avro_full_name
