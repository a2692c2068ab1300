"""The Kafka job's read path: Spark's Kafka source, Schema Registry frames decoded in the JVM, the batch writer.

Glue and the local runner share it; docs/kafka.md ("Read path") says why Spark's Kafka source and not Glue's
catalog source (whose own Avro decoder fails the batch, and with it the job, on a value it cannot read).

- `reader_options(...)`: the Kafka source's options (Spark's structured-streaming-kafka-integration page names
  each): the topic, or `assign` to give this job a list of partitions; startingOffsets, maxOffsetsPerTrigger,
  minPartitions; failOnDataLoss stays true (expired offsets: docs/kafka.md "Expired offsets"); on MSK the IAM
  login of aws-msk-iam-auth on port 9098.
- `KafkaBatches`: the foreachBatch function: envelope (glue_jobs/sources.from_kafka_records), then the batch
  writer, which asks it to decode the batch again when it met schema versions the registry then knows.
"""

from __future__ import annotations

import json

from glue_jobs.batch import BatchStats, MicroBatchWriter
from glue_jobs.decoding.registry_frames import FrameDecoding
from glue_jobs.sources import from_kafka_records

# aws-msk-iam-auth's settings for a Kafka client (its README, "Configuring a Kafka client to use AWS IAM"), as
# Spark's Kafka source takes client settings: with the `kafka.` prefix.
MSK_IAM_OPTIONS = {
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "AWS_MSK_IAM",
    "kafka.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
    "kafka.sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
}


def reader_options(*, bootstrap_servers: str, topic: str, partitions: list[int] | None = None, starting_offsets: str,
                   max_offsets_per_trigger: int | None = None, min_partitions: int | None = None,
                   iam_auth: bool = True) -> dict[str, str]:
    """Options of Spark's Kafka source for one source of the config (see the module doc)."""
    if not bootstrap_servers:
        raise ValueError("bootstrap_servers is empty: the stack passes the cluster's IAM bootstrap brokers")
    if starting_offsets not in ("earliest", "latest"):
        raise ValueError(f"starting_offsets {starting_offsets!r} is not 'earliest' or 'latest'")
    options = {"kafka.bootstrap.servers": bootstrap_servers, "startingOffsets": starting_offsets,
               # Spark's default, written down: offsets the topic's retention deleted fail the query (docs/kafka.md).
               "failOnDataLoss": "true", "includeHeaders": "false"}
    if partitions:
        if any(not isinstance(p, int) or isinstance(p, bool) or p < 0 for p in partitions) or len(set(partitions)) != len(partitions):
            raise ValueError(f"partitions {partitions!r} must be distinct non-negative integers")
        options["assign"] = json.dumps({topic: sorted(partitions)}, separators=(",", ":"))
    else:
        options["subscribe"] = topic
    if max_offsets_per_trigger is not None:
        if max_offsets_per_trigger < 1:
            raise ValueError(f"max_offsets_per_trigger must be >= 1, got {max_offsets_per_trigger}")
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    if min_partitions is not None:
        if min_partitions < 1:
            raise ValueError(f"min_partitions must be >= 1, got {min_partitions}")
        options["minPartitions"] = str(min_partitions)
    return options | (MSK_IAM_OPTIONS if iam_auth else {})


class KafkaBatches:
    """`(kafka frame, batch id) -> BatchStats`: what foreachBatch calls for a Kafka source."""

    def __init__(self, writer: MicroBatchWriter, decoding: FrameDecoding, source_name: str) -> None:
        self.writer, self.decoding, self.source_name = writer, decoding, source_name

    def __call__(self, frame, batch_id: int) -> BatchStats:
        def redecode(version_ids: list[str]):
            if not self.decoding.refresh(version_ids, frame.sparkSession):
                return None
            return from_kafka_records(frame, self.source_name, self.decoding)

        return self.writer(from_kafka_records(frame, self.source_name, self.decoding), batch_id, redecode=redecode)


class KafkaRouter:
    """A routed Kafka topic's frames by their registry schema (glue_jobs/decoding/schema_routes.py), for
    glue_jobs/routed_batch.py's RoutedWriter (JsonRouter says what a router offers). `owners`: the SchemaOwners of the
    topic; `decodings`: each dataset's FrameDecoding (its own function name, its own registry versions).

    A batch first meets its version ids: the frame, with each value's id, is cached, the ids no one has looked up are
    looked up (one small aggregation over the cached batch, a GetSchemaVersion per new id), then each frame routes to
    its id's dataset. Each dataset's part is decoded by its own decoder, which also learns a newer version of its own
    schema as a single-dataset source does (`redecode`); what routes nowhere keeps its bytes (base64) as payload."""

    def __init__(self, owners, decodings: dict[str, FrameDecoding], source_name: str) -> None:
        from glue_jobs.decoding.schema_routes import SchemaRoutes

        self.kind = SchemaRoutes
        self.owners, self.decodings, self.source_name = owners, decodings, source_name
        self.batch_owners = owners  # the ones the batch being written was routed with

    @classmethod
    def loaded(cls, spark, glue, routes, source_name: str) -> KafkaRouter:
        """The router of a topic routed by `routes` (a SchemaRoutes), for Glue and the local runner alike: each dataset's
        committed registry versions loaded (and checked against its files) before the first frame is read, and its own
        decoder (its own function name)."""
        from glue_jobs import datasets
        from glue_jobs.decoding.registry_frames import RegistryVersions, function_name
        from glue_jobs.decoding.schema_routes import SchemaOwners

        versions = {name: RegistryVersions(glue, registry_name=routes.registry, schema_name=routes.schema_of(name),
                                           dataset=datasets.load(name)) for name in routes.datasets}
        for found in versions.values():
            found.load()
        decodings = {name: FrameDecoding(spark, found.dataset, found, name=function_name(f"{source_name}_{name}"))
                     for name, found in versions.items()}
        return cls(SchemaOwners.loaded(glue, routes, versions), decodings, source_name)

    def route(self, frame, routes):
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from glue_jobs.decoding.schema_routes import version_id
        from glue_jobs.routed_batch import ROUTE

        # A replay under the table the batch was first routed with (RoutedWriter.routes_for) looks every id it meets up
        # again under that table; the next batch routes with the current one.
        owners = self.owners if routes == self.owners.routes else type(self.owners)(self.owners.glue, routes)
        cached = frame.withColumn(_VERSION, version_id()).persist(StorageLevel.MEMORY_AND_DISK_DESER)
        met = [row[0] for row in cached.select(_VERSION).where(F.col(_VERSION).isNotNull()).distinct().collect()]
        owners.learn(met)
        self.batch_owners = owners
        return cached.withColumn(ROUTE, owners.dataset(F.col(_VERSION))), cached

    def part(self, frame, dataset: str):
        decoding, part = self.decodings[dataset], frame.drop(_VERSION)

        def redecode(version_ids: list[str]):
            if not decoding.refresh(version_ids, part.sparkSession):
                return None
            return from_kafka_records(part, self.source_name, decoding)

        return from_kafka_records(part, self.source_name, decoding), redecode

    def unroutable(self, frame, routes):
        from pyspark.sql import functions as F

        from glue_jobs.routed_batch import DETAIL
        from glue_jobs.schema import PROBLEM_DDL

        # Any dataset's decoder: its verdict on a value that is no frame (malformed_record, the JVM decoder's detail) and
        # its payload for a value it cannot read (the bytes in base64) do not depend on the dataset.
        decoded = F.col("_decoded")
        return frame.select(next(iter(self.decodings.values())).column("value").alias("_decoded"),
                            "partition", "offset", "timestamp", _VERSION).select(
            decoded.getField("payload").alias("payload"), F.lit(self.source_name).alias("source"),
            F.col("partition").cast("string").alias("source_partition"), F.col("offset").cast("string").alias("source_offset"),
            F.col("timestamp").alias("arrival_time"),
            F.when(F.col(_VERSION).isNull(), F.struct(decoded.getField("reason").alias("reason"), decoded.getField("detail").alias("detail")))
            .cast(PROBLEM_DDL).alias("problem"),
            self.batch_owners.detail(F.col(_VERSION)).alias(DETAIL))


_VERSION = "_schema_version_id"
