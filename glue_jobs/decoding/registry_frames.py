"""Kafka values framed by the AWS Glue Schema Registry serializer: the frame format, and decoding in the job.

Frame (docs/kafka.md "Frames" cites awslabs/aws-glue-schema-registry):

    byte 0       header version, 3
    byte 1       compression: 0 none, 5 zlib (the Avro body deflated as a whole)
    bytes 2-17   the writer's schema version id, a UUID, most significant bits first
    bytes 18-    the Avro binary encoding of one record (zlib-deflated when byte 1 is 5)

`frame(...)` builds one (the producer, the tests). `FrameDecoding` decodes a batch's values in the JVM: it
registers com.streamlake.glue.RegistryFrameDecoder (jvm/glue-functions, shipped with `--extra-jars`) as a Spark
function that knows every committed version of the dataset by its registry UUID, reads each body with its
writer's version and resolves it to the dataset's newest version (Avro schema resolution), and renders the
record as the dataset's JSON, which then meets the dataset's contract like a JSON record. No Python runs per
record. A value that cannot be decoded gets `malformed_record` or `unknown_schema_version`. With
`typed_records`, the function also returns each decoded record as Spark values in the shape of the contract's
plain JSON parse (`record_type`), so glue_jobs/contract/typed_contract.py skips parsing its JSON (null where that shape
cannot hold a value exactly: the contract then reads the JSON).

The UUID -> version map comes from the registry (`glue:GetSchemaVersion`), checked against the dataset's own
files: a registry version whose definition differs from the committed file fails the job at start, since the
job would otherwise read records with a schema their producer did not write. An unknown UUID is looked up
when a batch meets it (`refresh`): a version of this dataset's schema that the job zip also has joins the
map and the batch is decoded again; any other stays unknown (its records are dead letters, replayable once
the version is deployed). A registry version newer than the deployed dataset is unknown on purpose:
resolved to the older schema its new fields would be dropped without a trace.
"""

from __future__ import annotations

import json
import re
import uuid
import zlib
from collections.abc import Iterable

from glue_jobs.datasets import Dataset

HEADER_VERSION = 3
NO_COMPRESSION, ZLIB = 0, 5
HEADER_BYTES = 18
DECODER_CLASS = "com.streamlake.glue.RegistryFrameDecoder"
MALFORMED_RECORD = "malformed_record"
UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"
DECODED_FIELDS = ("reason", "detail", "payload", "schema_version", "record")


def frame(schema_version_id: str | uuid.UUID, avro_body: bytes, *, compression: int = NO_COMPRESSION) -> bytes:
    """One Schema Registry frame around an Avro binary body (see the module doc)."""
    if compression not in (NO_COMPRESSION, ZLIB):
        raise ValueError(f"compression must be {NO_COMPRESSION} (none) or {ZLIB} (zlib), not {compression!r}")
    body = zlib.compress(avro_body) if compression == ZLIB else avro_body
    return bytes([HEADER_VERSION, compression]) + uuid.UUID(str(schema_version_id)).bytes + body


def canonical(definition: str) -> str:
    """A schema definition compared by content: parsed JSON, compact (the registry may store either form)."""
    return json.dumps(json.loads(definition), separators=(",", ":"), sort_keys=True)


def definition_problem(dataset: Dataset, found: dict, number: int) -> str | None:
    """Why a GetSchemaVersion answer is not the dataset's committed version `number`, or None when it is."""
    if canonical(found["SchemaDefinition"]) != canonical(dataset.schema_text(number)):
        return (f"registry version {number} ({found['SchemaVersionId']}) differs from datasets/{dataset.name}/"
                f"schema.v{number}.avsc")
    return None


class RegistryVersions:
    """The dataset's registry schema versions by UUID, from `glue:GetSchemaVersion` (a boto3 Glue client)."""

    def __init__(self, glue_client, *, registry_name: str, schema_name: str, dataset: Dataset) -> None:
        self.glue, self.dataset = glue_client, dataset
        self.schema_id = {"RegistryName": registry_name, "SchemaName": schema_name}
        self.known: dict[str, int] = {}  # UUID -> version number, every one checked against the dataset's file
        self.not_found: dict[str, str] = {}  # UUID -> why it is unknown (looked up once)

    def load(self) -> dict[str, int]:
        """Every committed version of the dataset, by number; fails when the registry lacks one or disagrees."""
        problems = []
        for number in self.dataset.versions:
            try:
                found = self.glue.get_schema_version(SchemaId=self.schema_id, SchemaVersionNumber={"VersionNumber": number})
            except self.glue.exceptions.EntityNotFoundException:
                problems.append(f"version {number} is not registered")
                continue
            problem = self._check(found, number)
            if problem:
                problems.append(problem)
            else:
                self.known[found["SchemaVersionId"]] = number
        if problems:
            raise ValueError(f"dataset {self.dataset.name}: the Schema Registry schema {self.schema_id} does not hold the "
                             f"dataset's committed versions: {'; '.join(problems)} (deploy the stack that registers them)")
        return dict(self.known)

    def _check(self, found: dict, number: int) -> str | None:
        return definition_problem(self.dataset, found, number)

    def look_up(self, version_ids: Iterable[str]) -> bool:
        """Look up UUIDs not seen before; True when there were any (decode the batch again: a UUID joined `known`, or
        its dead letters now say why it is unknown). Each UUID is looked up once per job run."""
        looked_up = False
        for version_id in sorted(set(version_ids) - set(self.known) - set(self.not_found)):
            looked_up = True
            try:
                found = self.glue.get_schema_version(SchemaVersionId=version_id)
            except self.glue.exceptions.EntityNotFoundException:
                self.not_found[version_id] = "not in the registry"
                continue
            number = found.get("VersionNumber")
            if not found.get("SchemaArn", "").endswith(f"/{self.schema_id['RegistryName']}/{self.schema_id['SchemaName']}"):
                self.not_found[version_id] = f"a version of another schema ({found.get('SchemaArn')})"
            elif number not in self.dataset.versions:
                self.not_found[version_id] = (f"version {number} of the registry schema, newer than the deployed dataset "
                                              f"(v{self.dataset.latest_version}): deploy it, then replay the dead letters")
            elif (problem := self._check(found, number)) is not None:
                self.not_found[version_id] = problem
            else:
                self.known[version_id] = number
        return looked_up


def function_name(source_name: str) -> str:
    """The SQL name of a source's decoder function: a source name may hold '-' (`orders-p0`), an identifier not."""
    return "streamlake_decode_" + re.sub(r"[^A-Za-z0-9_]", "_", source_name)


def record_type(dataset: Dataset):
    """The Spark type of a decoded record: the contract's plain parse of the dataset's JSON (typed_parse.wire_type),
    its decimals at their declared precision and scale, which hold a decoded decimal exactly (the decoder answers
    no record otherwise) and are the lake's stored types: no conversion to a wider type and back."""
    from glue_jobs.decoding.typed_parse import wire_type

    return wire_type(dataset.schema, "", declared_decimals=True)


def decoded_type(dataset: Dataset):
    """The decoder function's result: struct<reason, detail, payload, schema_version: string, record: record_type>."""
    from pyspark.sql import types as T

    string = T.StringType()
    return T.StructType([*(T.StructField(name, string) for name in DECODED_FIELDS[:-1]),
                         T.StructField("record", record_type(dataset))])


class FrameDecoding:
    """The decoder as a Spark function for one source: `column(value)` -> decoded_type struct. `refresh(ids)` looks new
    UUIDs up in the registry and re-registers the function (a plan built after it sees the new map and reasons).
    `typed_records` (the jobs' default): fill the result's `record` (see the module doc), which spares the contract the
    payload's parse; off, the contract parses every payload (tests/spark/test_registry_frames.py runs both ways)."""

    def __init__(self, spark, dataset: Dataset, versions: RegistryVersions | dict[str, int], *, name: str,
                 typed_records: bool = True) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"decoder function name {name!r} is not a SQL identifier (see function_name)")
        self.spark, self.dataset, self.name, self.typed_records = spark, dataset, name, typed_records
        self.versions = versions
        self._register()

    def _known(self) -> dict[str, int]:
        return self.versions.known if isinstance(self.versions, RegistryVersions) else self.versions

    def _register(self, session=None) -> None:
        """Register the function on the job's session and on `session`: a streaming query plans its batches in a clone
        of the session made when it started, whose function registry no longer follows the original's."""
        jvm = self.spark.sparkContext._jvm
        writers = {version_id: self.dataset.schema_text(number) for version_id, number in self._known().items()}
        try:
            decoder = jvm.com.streamlake.glue.RegistryFrameDecoder(writers, self.dataset.schema_text(), self._unknown(),
                                                                   self.typed_records)
        except TypeError as error:  # py4j: no such class on the classpath
            raise RuntimeError(f"{DECODER_CLASS} is not on the JVM's classpath: the Kafka job needs the jar of "
                               "jvm/glue-functions (--extra-jars on Glue; spark.jars locally)") from error
        data_type = jvm.org.apache.spark.sql.types.DataType.fromJson(decoded_type(self.dataset).json())
        for target in {id(s): s for s in (self.spark, session or self.spark)}.values():
            target._jsparkSession.udf().register(self.name, decoder, data_type)

    def column(self, value_sql: str = "value"):
        from pyspark.sql import functions as F

        return F.expr(f"{self.name}({value_sql})")

    def refresh(self, version_ids: Iterable[str], session=None) -> bool:
        """True when a UUID was new to the registry lookup: the function is registered again (also on `session`, the
        batch frame's), so decode the batch again."""
        if isinstance(self.versions, RegistryVersions) and self.versions.look_up(version_ids):
            self._register(session)
            return True
        return False

    def _unknown(self) -> dict[str, str]:
        return dict(self.versions.not_found) if isinstance(self.versions, RegistryVersions) else {}


def version_id_of(detail: str) -> str | None:
    """The UUID an unknown_schema_version detail names (the JVM decoder's detail: 'schema version <uuid> is ...')."""
    parts = detail.split()
    return parts[2] if len(parts) > 2 and parts[:2] == ["schema", "version"] else None

