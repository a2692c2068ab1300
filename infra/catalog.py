"""Data Catalog and Schema Registry of one environment, all generated from the datasets' files
(datasets/<name>/schema.v<N>.avsc; clickstream's through glue_jobs/schema.py).

- Schema Registry: one registry and a schema (Avro, BACKWARD) per dataset some source carries (`_register`):
  version 1 is the AWS::Glue::Schema (datasets/<name>/schema.v1.avsc, unchanged since creation, so the schema is
  never replaced), every later committed file an AWS::Glue::SchemaVersion, registered in order. clickstream's
  keeps the logical id `EventSchema` it had before datasets; the Kafka jobs look the versions up by number at start
  (glue_jobs/decoding/registry_frames.py). Versions are create-only (Schema, SchemaDefinition) and files never change, so
  an evolution deploys as "added", with no replacement.
- Source tables the streaming jobs read: one per Kinesis stream (JSON, typeOfData=kinesis). Kafka jobs read the
  topic with Spark's Kafka source and decode the Schema Registry frames themselves, so the topic has no table.
- The lake table (Parquet under `events/`, partitioned by event_date/event_hour) and one dead-letter
  table per source (Parquet under `dead_letters/<source>/`, partitioned by ingest_date). A routed source (a stream
  whose records are several datasets, routed by a field) has one per dataset it carries, under
  `dead_letters/<source>/<dataset>/`, and one of its own records no route takes, under
  `dead_letters/<source>/unroutable/` (docs/datasets.md "One stream, several datasets").

Partition visibility: the lake and dead-letter tables use Athena partition projection, so a new
event_date/event_hour folder is queryable the moment a file lands in it, with no crawler and no
partition registration by the jobs. Spark readers (the jobs, compaction) read by path and discover
Hive partitions from the folder names, so they do not depend on catalog partitions either.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_s3 as s3
from constructs import Construct

from glue_jobs import schema
from glue_jobs.datasets import Dataset
from glue_jobs.decoding.routes import UNROUTABLE
from infra.constants import pascal
from infra.naming import retained_name
from infra.storage import lake_prefix_of

SCHEMA_COMPATIBILITY = "BACKWARD"
# A lake table's partition projection runs from its dataset's event_time.not_before (clickstream: 2000-01-01)
# to processing time + max_future: a later start would hide valid events from Athena. The cost, an unfiltered
# query enumerating every hour since then, is documented (docs/infrastructure.md "Catalog and partition visibility").

PARQUET_STORAGE = {
    "input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
}
JSON_STORAGE = {
    "input_format": "org.apache.hadoop.mapred.TextInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "serde": "org.openx.data.jsonserde.JsonSerDe",
}


def _date_projection(column: str, date_range: str) -> dict[str, str]:
    """Athena partition projection of a daily yyyy-MM-dd partition column over `date_range`."""
    return {f"projection.{column}.type": "date", f"projection.{column}.format": "yyyy-MM-dd",
            f"projection.{column}.range": date_range, f"projection.{column}.interval": "1",
            f"projection.{column}.interval.unit": "DAYS"}


def table_name(kind: str, source_name: str = "") -> str:
    """Catalog names are lower-case with underscores (Athena does not accept '-' unquoted)."""
    return "_".join(p for p in (kind, source_name) if p).replace("-", "_")


class Catalog(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        project: str,
        environment: str,
        lake_bucket: s3.IBucket,
        datasets: Sequence[Dataset],
        carried: Mapping[str, tuple[str, ...]],
        routed: Mapping[str, str],
        dead_letter_bucket: s3.IBucket,
        dead_letter_prefix: str,
        dead_letter_retention_days: int,
        streams: Mapping[str, kinesis.IStream],
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self._catalog_id = stack.account
        # The database and its tables hold no data (the lake stays in its retained bucket) and are rebuilt
        # from this template, so they are destroyed with the stack in every environment and keep their
        # readable names; a retained database would block creating the environment again (infra/naming.py).
        # Tables someone adds to this database by hand go with it: keep them in a database of your own.
        self._removal_policy = cdk.RemovalPolicy.DESTROY

        self.database_name = f"{project}_{environment}".replace("-", "_")
        self.database = glue.Database(
            self,
            "Database",
            database_name=self.database_name,
            description=f"{project} {environment}: stream sources, lake and dead letters",
            removal_policy=self._removal_policy,
        )

        # Registered schema versions are data: the registry is retained where the environment retains, so
        # its name carries the stack instance suffix there (infra/naming.py).
        self.registry_name = retained_name(f"{project}-{environment}", removal_policy)
        self.registry = glue.CfnRegistry(
            self, "Registry", name=self.registry_name, description=f"{project} {environment} event schemas"
        )
        self.registry.apply_removal_policy(removal_policy)
        self.registry_arn = self.registry.attr_arn
        # {dataset: (schema name, schema ARN, newest version number, the resource that registers it)}
        self.dataset_schemas: dict[str, tuple[str, str, int, cdk.CfnResource]] = {}
        # One registry schema per dataset a source carries; clickstream's (`EventSchema`) like any other, so a
        # project without datasets/clickstream synthesizes without it.
        self.schema: glue.CfnSchema | None = None
        self.schema_name: str | None = None
        self.schema_arn: str | None = None
        for dataset in datasets:
            self._register(dataset, removal_policy)

        # {source name: table name} of every Kinesis source (its job reads the stream through it). A Kafka job
        # reads the topic with Spark's Kafka source and decodes frames itself (docs/kafka.md): no table.
        self.source_table_names: dict[str, str] = {}
        self.tables: dict[str, glue.CfnTable] = {}
        by_name = {d.name: d for d in datasets}
        for source_name, stream in streams.items():
            self._kinesis_table(source_name, stream, by_name[carried[source_name][0]], routed.get(source_name))

        # One lake table per dataset some source carries, under the dataset's own prefix.
        self.lake_table_names: dict[str, str] = {}
        self.lake_locations: dict[str, str] = {}
        for dataset in datasets:
            self._lake_table(dataset, lake_bucket)

        # One dead-letter table per source: the jobs write dead_letters/<source>/ingest_date=.../. A routed source:
        # one per dataset it carries (dead_letters/<source>/<dataset>/...) and one of its unroutable records. Keyed by
        # the folder under the dead-letter prefix; `dead_letter_datasets` says whose each is (None: the source's own).
        self.dead_letter_table_names: dict[str, str] = {}
        self.dead_letter_locations: dict[str, str] = {}
        self.dead_letter_datasets: dict[str, str | None] = {}
        folders: dict[str, tuple[str | None, str]] = {}
        for source_name, names in carried.items():
            if source_name not in routed:
                folders[source_name] = (names[0], f"Records of source {source_name} that failed validation, with the original payload")
                continue
            for name in names:
                folders[f"{source_name}/{name}"] = (name, f"Records of dataset {name} from routed source {source_name} that "
                                                          "failed validation, with the original payload")
            folders[f"{source_name}/{UNROUTABLE}"] = (None, f"Records of routed source {source_name} that no route takes "
                                                             f"(by {routed[source_name]}), with the original payload")
        for folder, (dataset_name, description) in folders.items():
            name = table_name("dead_letters", folder.replace("/", "_"))
            if name in self.dead_letter_table_names.values():
                raise ValueError(f"dead-letter folder {folder}: its table name {name} is another folder's too; rename the "
                                 "source or the dataset")
            location = f"s3://{dead_letter_bucket.bucket_name}/{dead_letter_prefix}/{folder}/"
            self._table(
                f"DeadLetterTable{pascal(folder.replace('/', '-'))}",
                name,
                description=description,
                columns=schema.dead_letter_columns(),
                partition_keys=schema.dead_letter_partition_columns(),
                location=location,
                storage=PARQUET_STORAGE,
                parameters={
                    "classification": "parquet",
                    "projection.enabled": "true",
                    # Dead letters expire after the configured days; older dates hold nothing.
                    **_date_projection("ingest_date", f"NOW-{dead_letter_retention_days}DAYS,NOW"),
                    "storage.location.template": f"{location}ingest_date=${{ingest_date}}/",
                },
            )
            self.dead_letter_table_names[folder] = name
            self.dead_letter_locations[folder] = location
            self.dead_letter_datasets[folder] = dataset_name

    def dead_letter_tables_of(self, dataset: str) -> dict[str, str]:
        """{folder under the dead-letter prefix: table} of the dead letters of `dataset`, from every source carrying it."""
        return {folder: self.dead_letter_table_names[folder] for folder, owner in self.dead_letter_datasets.items()
                if owner == dataset}

    def _register(self, dataset: Dataset, removal_policy: cdk.RemovalPolicy) -> None:
        """The dataset's registry schema: version 1 as the AWS::Glue::Schema, each later committed version an
        AWS::Glue::SchemaVersion in order (create-only and never changed, so an evolution deploys as added).
        clickstream's keeps the logical ids, name and description it had before datasets (`EventSchema`,
        `EventSchemaVersion<N>`, read through glue_jobs/schema.py), so an existing registry schema is never replaced."""
        kept = dataset.name == "clickstream"
        logical_id = "EventSchema" if kept else f"Schema{pascal(dataset.name)}"
        name = schema.avro_full_name() if kept else dataset.avro_full_name
        definition = schema.avro_schema_definition if kept else dataset.registry_definition
        resource = glue.CfnSchema(
            self, logical_id, name=name,
            registry=glue.CfnSchema.RegistryProperty(arn=self.registry.attr_arn), data_format="AVRO",
            compatibility=SCHEMA_COMPATIBILITY, schema_definition=definition(1),
            # clickstream's: its text at creation, kept so the template does not change
            description="Generated from schemas/event.avsc" if kept else f"Dataset {dataset.name} (datasets/{dataset.name}/schema.v1.avsc)",
        )
        resource.apply_removal_policy(removal_policy)
        previous: cdk.CfnResource = resource
        for number in (schema.schema_versions() if kept else dataset.versions)[1:]:
            version = glue.CfnSchemaVersion(
                self, f"{logical_id}Version{number}",
                schema=glue.CfnSchemaVersion.SchemaProperty(schema_arn=resource.attr_arn),
                schema_definition=definition(number),
            )
            version.apply_removal_policy(removal_policy)
            version.node.add_dependency(previous)
            previous = version
        latest = schema.latest_version() if kept else dataset.latest_version
        self.dataset_schemas[dataset.name] = (name, resource.attr_arn, latest, previous)
        if kept:  # the names the stack's outputs and tools read from before datasets
            self.schema, self.schema_name, self.schema_arn = resource, name, resource.attr_arn

    # ---- tables -------------------------------------------------------------------------------

    def _lake_table(self, dataset: Dataset, lake_bucket: s3.IBucket) -> None:
        """The dataset's typed lake table. clickstream keeps the name `events` and the logical id it had before
        datasets (a rename would replace the table and strand a deployed lake; infra/storage.lake_prefix_of)."""
        kept = dataset.name == "clickstream"
        name = table_name("events") if kept else table_name(dataset.name)
        location = f"s3://{lake_bucket.bucket_name}/{lake_prefix_of(dataset.name)}/"
        if dataset.table_format == "iceberg":
            # The streaming job creates and evolves an Iceberg table (infra/streaming_job.py _grant_catalog says why
            # the stack cannot), in its own folder of the dataset's prefix (glue_jobs/schema.ICEBERG_TABLE_FOLDER).
            self.lake_table_names[dataset.name] = name
            self.lake_locations[dataset.name] = f"{location}{schema.ICEBERG_TABLE_FOLDER}/"
            return
        # Projection from the dataset's not_before (UTC date): an earlier start would only add empty partitions
        # to unfiltered queries, a later one would hide valid events.
        start = time.strftime("%Y-%m-%d", time.gmtime(dataset.event_time.not_before_ms // 1000))
        future_days = max(1, -(-dataset.event_time.max_future_ms // 86_400_000))
        self._table(
            "LakeTable" if kept else f"LakeTable{pascal(dataset.name)}",
            name,
            description=("The lake: validated events, Parquet (snappy), Hive partitions in UTC" if kept else
                         f"Lake table of dataset {dataset.name}: {dataset.description} (Parquet, snappy, UTC hour partitions)"),
            # clickstream's columns from glue_jobs/schema.py, which reads datasets/clickstream/schema.v<N>.avsc (the
            # files the registry's EventSchema registers): the columns the table had before datasets, byte for byte.
            columns=schema.lake_columns() if kept else
            dataset.columns(catalog=True) + [(n, glue_type) for n, glue_type, _ in schema.INGESTION_COLUMNS],
            partition_keys=schema.lake_partition_columns(),
            location=location,
            storage=PARQUET_STORAGE,
            parameters={
                "classification": "parquet",
                "parquet.compression": "SNAPPY",
                "projection.enabled": "true",
                **_date_projection("event_date", f"{start},NOW+{future_days}DAYS"),
                "projection.event_hour.type": "integer",
                "projection.event_hour.range": "0,23",
                "storage.location.template": f"{location}event_date=${{event_date}}/event_hour=${{event_hour}}/",
            },
        )
        self.lake_table_names[dataset.name] = name
        self.lake_locations[dataset.name] = location

    def _kinesis_table(self, source_name: str, stream: kinesis.IStream, dataset: Dataset, route_field: str | None) -> None:
        """The stream's source table. Its columns: the dataset's; a routed stream's, its route field (a string along
        its path: the field is a string or an enum in every dataset it routes to). The job reads the stream with
        inferSchema (infra/streaming_job.py), so the columns do not shape its frame; whether Glue reads them at all
        with inferSchema on is unverified."""
        name = table_name("source", source_name)
        stack = cdk.Stack.of(self)
        # The shape the Glue console writes for a Kinesis source table; the streaming job reads it
        # through glueContext.create_data_frame.from_catalog.
        params = {
            "typeOfData": "kinesis",
            "streamARN": stream.stream_arn,
            "classification": "json",
            "endpointUrl": f"https://kinesis.{stack.region}.{stack.url_suffix}",
        }
        self._table(
            f"SourceTable{pascal(source_name)}",
            name,
            description=f"Kinesis stream of source {source_name} (JSON, one event per record)" if route_field is None else
            f"Kinesis stream of routed source {source_name} (JSON, one event per record; datasets by {route_field})",
            columns=_route_columns(route_field) if route_field is not None else
            schema.source_columns() if dataset.name == "clickstream" else dataset.source_columns(),
            location=stream.stream_name,
            storage=JSON_STORAGE,
            parameters=params,
            storage_parameters=params,
        )
        self.source_table_names[source_name] = name

    def _table(
        self,
        id_: str,
        name: str,
        *,
        description: str,
        columns: Sequence[tuple[str, str]],
        location: str,
        storage: Mapping[str, str],
        parameters: Mapping[str, str],
        partition_keys: Sequence[tuple[str, str]] = (),
        storage_parameters: Mapping[str, str] | None = None,
    ) -> glue.CfnTable:
        table = glue.CfnTable(
            self,
            id_,
            catalog_id=self._catalog_id,
            database_name=self.database.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=name,
                description=description,
                table_type="EXTERNAL_TABLE",
                parameters={"EXTERNAL": "TRUE", **parameters},
                partition_keys=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in partition_keys] or None,
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    columns=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in columns],
                    location=location,
                    input_format=storage["input_format"],
                    output_format=storage["output_format"],
                    serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=storage["serde"]),
                    parameters=dict(storage_parameters) if storage_parameters else None,
                ),
            ),
        )
        table.apply_removal_policy(self._removal_policy)
        self.tables[name] = table
        return table


def _route_columns(field: str) -> list[tuple[str, str]]:
    """The one column of a routed stream's table: `type` -> type string; `meta.type` -> meta struct<type:string>."""
    head, *rest = field.split(".")
    kind = "string"
    for part in reversed(rest):
        kind = f"struct<{part}:{kind}>"
    return [(head, kind)]
