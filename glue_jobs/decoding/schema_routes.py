"""Which dataset a frame of a routed Kafka topic belongs to: the registry schema its writer's schema version is a
version of (docs/kafka.md "One topic, several datasets").

A Schema Registry frame names its writer's schema version by id (bytes 2-17, glue_jobs/decoding/registry_frames.py).
A topic carrying several datasets binds each dataset to its registry schema (`SchemaRoutes`: the registry, and
per schema name the dataset). `SchemaOwners` knows, per version id, the dataset whose schema it is a version of:
first every committed version of every dataset (each checked against its files when the job starts, as a
single-dataset Kafka source's are), then each id a batch meets that it does not know, looked up once with
`glue:GetSchemaVersion` by id (the answer's SchemaArn names the registry and the schema; AWS Glue API reference,
"GetSchemaVersion": "SchemaArn - The Amazon Resource Name (ARN) of the schema"). An id of a dataset's schema goes to
that dataset even when the dataset does not know the version: its own decoder then calls it what it is
(`unknown_schema_version`, a newer version than the deployed dataset). An id of a schema no dataset on the topic is
bound to and an id the registry does not hold go to no dataset: they are `unroutable`, dead letters of the source,
the id and why in the detail. A value that is no frame (too short, another header) goes to no dataset either: a
dead letter of the source with the decoder's own verdict, `malformed_record`.

A version's schema never changes (the registry gives a new id to each version), so the same id routes the same way
in a replay; the bindings, which can change between a crash and a replay, are what the routed writer records per
batch (glue_jobs/routed_batch.py `RouteLog`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

from glue_jobs.decoding.registry_frames import HEADER_BYTES, HEADER_VERSION, RegistryVersions
from glue_jobs.decoding.routes import RESERVED, RouteError

_NAME = re.compile(r"^[A-Za-z0-9_.\-$#]{1,255}$")  # Glue's schema and registry names (CreateSchema: SchemaName pattern)
# What a routed Kafka source is routed by: its `route_field` (glue_jobs/job_arguments.ROUTED_BY_SCHEMA, the same text:
# tests/spark/test_kafka_routes.py; a decoding stage does not import the job's argument contract) and its checkpoint's
# owner record.
FIELD = "schema"


@dataclass(frozen=True)
class SchemaRoutes:
    """`registry`: the Schema Registry of the topic's schemas; `routes`: (schema name, dataset) pairs, sorted."""

    registry: str
    routes: tuple[tuple[str, str], ...]

    @property
    def field(self) -> str:
        return FIELD

    @classmethod
    def of(cls, registry: object, routes: object, *, registry_key: str = "registry", values_key: str = "schemas") -> SchemaRoutes:
        """From the registry's name and `{schema name: dataset}`; refuses, naming the key, a name Glue would not take,
        no route, two schemas bound to one dataset (its decoder reads one schema's versions), a reserved dataset."""
        if not isinstance(registry, str) or not _NAME.match(registry):
            raise RouteError(f"{registry_key}: {registry!r} is not a Schema Registry name")
        if not isinstance(routes, dict) or not routes:
            raise RouteError(f"{values_key}: must bind at least one registry schema to a dataset, got {routes!r}")
        seen: dict[str, str] = {}
        for schema, dataset in routes.items():
            if not isinstance(schema, str) or not _NAME.match(schema):
                raise RouteError(f"{values_key}: {schema!r} is not a Schema Registry schema name")
            if not isinstance(dataset, str) or not dataset:
                raise RouteError(f"{values_key} {schema}: {dataset!r} is not a dataset name")
            if dataset in RESERVED:
                raise RouteError(f"{values_key} {schema}: {dataset!r} is reserved (a routed source's own dead letters)")
            if dataset in seen:
                raise RouteError(f"{values_key}: schemas {seen[dataset]} and {schema} are both bound to dataset {dataset}; a "
                                 "dataset reads the versions of one registry schema")
            seen[dataset] = schema
        return cls(registry, tuple(sorted(routes.items())))

    @property
    def datasets(self) -> tuple[str, ...]:
        return tuple(sorted(dataset for _, dataset in self.routes))

    def schema_of(self, dataset: str) -> str:
        return next(schema for schema, bound in self.routes if bound == dataset)

    def problems(self, datasets: dict) -> list[str]:
        """A dataset the routes name that the source does not have."""
        return [f"dataset {name}: bound to schema {self.schema_of(name)} but not one of the source's datasets"
                for name in self.datasets if name not in datasets]

    def to_record(self) -> dict:
        return {"field": self.field, "registry": self.registry, "routes": [list(route) for route in self.routes]}

    @classmethod
    def from_record(cls, record: dict) -> SchemaRoutes:
        return cls.of(record["registry"], dict(record["routes"]))


def version_id(value: str = "value") -> Column:
    """The writer's schema version id of each frame (binary column `value`), as the registry spells it (lower-case
    UUID), or null when the value is not a frame: shorter than the header or another header version."""
    data = F.col(value)
    digits = F.lower(F.hex(F.substring(data, 3, 16)))
    uuid = F.concat_ws("-", *(F.substring(digits, start, length) for start, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))))
    is_frame = (F.length(data) >= HEADER_BYTES) & (F.hex(F.substring(data, 1, 1)) == F.lit(f"{HEADER_VERSION:02X}"))
    return F.when(is_frame, uuid)


@dataclass
class SchemaOwners:
    """Version id -> the dataset it routes to (the module doc). `versions`: each dataset's RegistryVersions, loaded."""

    glue: object
    routes: SchemaRoutes
    owner: dict[str, str] = field(default_factory=dict)
    foreign: dict[str, str] = field(default_factory=dict)  # id -> why no dataset of the topic takes it

    @classmethod
    def loaded(cls, glue, routes: SchemaRoutes, versions: dict[str, RegistryVersions]) -> SchemaOwners:
        return cls(glue, routes, {version: name for name, found in versions.items() for version in found.known})

    def learn(self, version_ids) -> None:
        """Look up the ids not seen before (each once per run)."""
        new = sorted(set(version_ids) - set(self.owner) - set(self.foreign))
        bound = dict(self.routes.routes)
        for version in new:
            try:
                found = self.glue.get_schema_version(SchemaVersionId=version)
            except self.glue.exceptions.EntityNotFoundException:
                self.foreign[version] = "is not in the registry"
                continue
            # arn:aws:glue:<region>:<account>:schema/<registry>/<schema>, the form RegistryVersions.look_up reads too.
            registry, _, schema = found.get("SchemaArn", "").partition(":schema/")[2].partition("/")
            if registry == self.routes.registry and schema in bound:
                self.owner[version] = bound[schema]
            else:
                self.foreign[version] = f"is a version of {found.get('SchemaArn')}, which no dataset on the topic is bound to"

    def dataset(self, version: Column) -> Column:
        """The dataset of each frame's version id (null: unroutable)."""
        routed = None
        for version_text, dataset in sorted(self.owner.items()):
            routed = (F.when if routed is None else routed.when)(version == F.lit(version_text), F.lit(dataset))
        return routed if routed is not None else F.lit(None).cast("string")

    def detail(self, version: Column) -> Column:
        """Why a frame routes to no dataset, for its dead letter's `detail` (null for a value that is no frame: its
        decoder's malformed_record verdict says why)."""
        bound = ", ".join(f"{schema} ({dataset})" for schema, dataset in self.routes.routes)
        why = None
        for version_text, reason in sorted(self.foreign.items()):
            why = (F.when if why is None else why.when)(version == F.lit(version_text), F.lit(reason))
        why = F.lit("is not known to the job") if why is None else why.otherwise(F.lit("is not known to the job"))
        return F.concat(F.lit("schema version "), version, F.lit(" "), why, F.lit(f" (registry {self.routes.registry}: {bound})"))
