"""A Glue streaming job running one source or several (Kinesis streams, MSK topics), with its own least-privilege
role: it may read exactly its sources and write exactly their datasets, dead letters and checkpoints.

Runtime choices (config/environments.json `streaming`, or a declared job's own block in `streaming_jobs`):
- Glue version: default 4.0 (Spark 3.3). Glue 4.0 is the line the Glue streaming documentation and
  its Kinesis connector (emitConsumerLagMetrics) are documented and proven on (Kafka jobs read with
  Spark's Kafka source and decode frames with the project's jar: docs/kafka.md), and it supports G.025X and auto scaling; 5.0 (Spark 3.5) is allowed
  and the job code is tested on both Spark lines.
- Auto scaling: `--enable-auto-scaling=true`, so NumberOfWorkers is the maximum.
- Timeout: STREAMING_TIMEOUT, 7 days, the most the Glue API allows ("Jobs must have timeout values less than 7 days
  or 10080 minutes"). A blank timeout is no longer unlimited: the API's Timeout now reads "When the value is left
  blank, the timeout is defaulted to 2,880 minutes for Glue version 4.0 and earlier, or 480 minutes for Glue version
  5.0 and later", which would end a healthy streaming run after 48 or 8 hours. With a timeout of 7 days Glue restarts
  the run itself: "If the timeout is greater than 7 days, then AWS Glue checks if the maintenance window is
  configured ... AWS Glue will restart the job within 3 hours of the specified maintenance window", and without a
  window 7 days after the run started (Glue "Maintenance windows for AWS Glue Streaming"). Whether a timeout of
  exactly 10,080 minutes takes the restart path or ends the run in TIMEOUT is unverified (docs/operations.md says how
  to settle it); either way the job keeper starts the job again and the checkpoint makes it lossless.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_s3 as s3
from constructs import Construct

from glue_jobs.datasets import Dataset
from glue_jobs.job_arguments import ROUTED_BY_SCHEMA
from glue_jobs.metrics import METRICS_NAMESPACE
from glue_jobs.schema import ICEBERG_TABLE_FOLDER
from infra import job_assets
from infra.config import StreamingJobConfig
from infra.functions.job_keeper.handler import CHECKPOINT_BUCKET_TAG
from infra.glue_security import GlueJobSecurity
from infra.job_iam import (
    acknowledge_glue_job_role,
    add_spark_ui,
    grant_prefix,
    grant_put_metric_data,
    override_default_arguments,
)
from infra.msk import kafka_arn
from infra.nag import acknowledge_wildcard_resource

# The streaming jobs' timeout (see the module doc).
STREAMING_TIMEOUT = cdk.Duration.minutes(10_080)


@dataclass(frozen=True)
class KafkaSource:
    """What a Kafka/MSK job reads: the topic on a cluster (Spark's Kafka source, IAM auth on 9098, in the VPC of
    a Glue connection), values framed by the Schema Registry serializer and decoded in the job."""

    cluster_arn: str
    bootstrap_servers: str  # the cluster's SASL/IAM bootstrap brokers (infra/msk.py)
    topic: str
    connections: tuple[glue.IConnection, ...]  # the KAFKA connection first, then failover NETWORK connections
    registry_arn: str
    schema_arns: tuple[str, ...]  # the registry schema of each dataset the topic carries
    registry_name: str
    # the dataset's schema in the registry: the job maps frames' version UUIDs through it; None for a routed topic,
    # whose route names each dataset's schema (SourceRoute, field "schema")
    schema_name: str | None
    connection_subnet_ids: tuple[str, ...]  # the connections' subnets, where Glue creates its network interfaces
    connection_security_group_ids: tuple[str, ...]  # the security groups Glue puts on them
    connection_vpc_id: str  # the VPC of those subnets
    partitions: tuple[int, ...] | None = None  # this job's partition group (Spark's assign); None: the whole topic
    min_partitions: int | None = None  # Spark's minPartitions (infra.config MskConfig.min_partitions_for)


@dataclass(frozen=True)
class LakeLocations:
    lake_bucket: s3.IBucket
    lake_prefix: str  # the job's dataset's prefix, e.g. "events" (infra/storage.lake_prefix_of)
    dead_letter_bucket: s3.IBucket
    dead_letter_prefix: str  # e.g. "dead_letters"
    checkpoint_bucket: s3.IBucket
    checkpoint_prefix: str  # e.g. "checkpoints"
    spark_ui_bucket: s3.IBucket | None = None  # Spark UI event logs, under spark-ui/<source>/ (the job assets bucket)


@dataclass(frozen=True)
class CatalogNames:
    database_name: str
    source_table_name: str | None  # the Kinesis source table; None for a Kafka source (it reads the topic directly)
    lake_table_name: str


@dataclass(frozen=True)
class CarriedDataset:
    """One dataset a source carries: its files, its lake prefix and its lake table."""

    dataset: Dataset
    lake_prefix: str
    lake_table_name: str


@dataclass(frozen=True)
class SourceRoute:
    """A routed source's route (infra.config RouteConfig): the field, (value, dataset) pairs, and each dataset's
    lake (glue_jobs/routed_batch.py writes each dataset's rows to its own lake)."""

    field: str
    values: tuple[tuple[str, str], ...]
    datasets: tuple[CarriedDataset, ...]


@dataclass(frozen=True)
class JobSource:
    """One source a streaming job runs: what it reads (a Kinesis stream or a Kafka topic), the dataset it carries
    (or, routed, the datasets its route names), where the rows, the source's dead letters and checkpoint go, and its
    catalog tables."""

    name: str
    dataset: Dataset | None
    locations: LakeLocations
    catalog: CatalogNames
    stream: kinesis.IStream | None = None
    kafka: KafkaSource | None = None
    route: SourceRoute | None = None

    @property
    def source_type(self) -> str:
        return "kinesis" if self.stream is not None else "kafka"

    @property
    def carried(self) -> tuple[CarriedDataset, ...]:
        """Every dataset the source writes: its one, or its route's."""
        if self.route is not None:
            return self.route.datasets
        return (CarriedDataset(self.dataset, self.locations.lake_prefix, self.catalog.lake_table_name),)

    def lake_path_of(self, carried: CarriedDataset) -> str:
        return f"s3://{self.locations.lake_bucket.bucket_name}/{carried.lake_prefix}"

    @property
    def lake_path(self) -> str:
        if self.route is not None:
            raise ValueError(f"source {self.name} is routed: each of its datasets has its own lake path")
        return self.lake_path_of(self.carried[0])

    @property
    def dead_letter_path(self) -> str:
        return f"s3://{self.locations.dead_letter_bucket.bucket_name}/{self.locations.dead_letter_prefix}/{self.name}"

    @property
    def checkpoint_path(self) -> str:
        return f"s3://{self.locations.checkpoint_bucket.bucket_name}/{self.locations.checkpoint_prefix}/{self.name}/"


class StreamingJob(Construct):
    """One Glue streaming job running `sources` side by side (glue_jobs/sources/source_queries.py), sized by `settings`.
    `name` names its log group and Spark UI prefix: a job of one source is named after it, as before jobs held
    several."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        environment: str,
        name: str,
        sources: Sequence[JobSource],
        settings: StreamingJobConfig,
        security: GlueJobSecurity,
    ) -> None:
        super().__init__(scope, id_)
        if not sources:
            raise ValueError(f"streaming job {name}: no source to run")
        for source in sources:
            if (source.stream is None) == (source.kafka is None):
                raise ValueError(f"streaming job {name}, source {source.name}: give exactly one of stream or kafka")
            if (source.dataset is None) == (source.route is None):
                raise ValueError(f"streaming job {name}, source {source.name}: give exactly one of dataset or route")
            if source.kafka is not None and (source.route is not None) != (source.kafka.schema_name is None):
                raise ValueError(f"streaming job {name}, source {source.name}: a Kafka source names its one schema, or "
                                 "is routed by schema (SchemaRoutes), not both")
            if source.route is not None and (source.route.field == ROUTED_BY_SCHEMA) != (source.kafka is not None):
                raise ValueError(f"streaming job {name}, source {source.name}: a Kafka source is routed by registry "
                                 f"schema, a Kinesis one by a field, not {source.route.field!r}")
            iceberg = [c.dataset.name for c in source.carried if c.dataset.table_format == "iceberg"]
            if source.route is not None and iceberg:
                raise ValueError(f"streaming job {name}, source {source.name}: a routed source's datasets are Parquet "
                                 f"datasets; {', '.join(iceberg)} is Iceberg here")
        stack = cdk.Stack.of(self)
        self.name = name
        self.source_types = {source.name: source.source_type for source in sources}
        kafka = [source.kafka for source in sources if source.kafka is not None]
        first = sources[0]
        single = len(sources) == 1

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description=f"Glue streaming job for source {first.name}" if single else
            f"Glue streaming job {name} for sources {', '.join(s.name for s in sources)}",
        )
        self._grant_storage(sources, settings.glue_version)
        self._grant_catalog(stack, sources)
        security.grant_job(self.role)
        for source in sources:
            if source.stream is not None:
                source.stream.grant_read(self.role)
        if kafka:
            self._grant_kafka(stack, kafka)

        self.sources = tuple({
            "source_name": source.name,
            "source_type": source.source_type,
            **self._dataset_keys(source),
            "dead_letter_path": source.dead_letter_path,
            "checkpoint_path": source.checkpoint_path,
            **self._source_options(settings, source),
            **self._iceberg_keys(source),
        } for source in sources)
        iceberg = any(c.dataset.table_format == "iceberg" for source in sources for c in source.carried)
        self.default_arguments = {
            "--environment": environment,
            "--catalog_database": first.catalog.database_name,
            "--window_size_seconds": str(settings.window_size_seconds),
            "--batch_max_retries": str(settings.batch_max_retries),
            "--metrics_namespace": METRICS_NAMESPACE,
            "--metrics_region": cdk.Aws.REGION,
            # Each source the job runs, one JSON object each (glue_jobs/job_arguments.py SOURCE_KEYS); the bucket names
            # and bootstrap brokers in it are CloudFormation references, joined into the string at deploy time.
            "--sources": json.dumps(list(self.sources), separators=(",", ":")),
            # Glue's Iceberg jars ("Using the Iceberg framework in AWS Glue") for a job with an Iceberg dataset.
            **({"--datalake-formats": "iceberg"} if iceberg else {}),
            "--enable-auto-scaling": "true",
        }
        self.logging = security.job_logging(self, name, self.role, settings.glue_version)
        described = f"stream {first.name} ({first.source_type})" if single else \
            "streams " + ", ".join(f"{s.name} ({s.source_type})" for s in sources)
        self.job = glue.PySparkStreamingJob(
            self,
            "Job",
            description=f"{environment}: {described} into the lake",
            role=self.role,
            default_arguments=self.default_arguments,
            # A job with a Kafka source runs in the VPC of the MSK connection; its Kinesis sources are reached from
            # there through the network's NAT (infra/config/rules.py refuses a network without one).
            connections=list(kafka[0].connections) if kafka else None,
            timeout=STREAMING_TIMEOUT,
            # jvm/glue-functions, loaded by Glue from --extra-jars (the L2 sets it): the Kafka job's frame decoder and
            # the contract's JSON proof (glue_jobs/contract/strict_json.py).
            extra_jars=[job_assets.functions_jar(self)],
            **job_assets.common_job_props(
                self,
                "glue_jobs",
                glue_version=settings.glue_version,
                worker_type=settings.worker_type,
                workers=settings.max_workers,
                security_configuration=security.configuration,
                logging=self.logging,
            ),
        )
        override_default_arguments(self.job, self.logging.arguments)  # the L2 reserves the logging ones
        # The bucket of its checkpoints, by which the job keeper may stop this job's runs when another job takes over
        # one of its sources (infra/functions/job_keeper/handler.py release_checkpoints).
        cdk.Tags.of(self.job).add(CHECKPOINT_BUCKET_TAG, first.locations.checkpoint_bucket.bucket_name)
        acknowledge_glue_job_role(self.role, uses_connection=bool(kafka))
        add_spark_ui(self.job, self.role, first.locations.spark_ui_bucket, name, glue_version=settings.glue_version)
        if settings.maintenance_window:
            cfn_job = self.job.node.default_child
            cfn_job.maintenance_window = _maintenance_window(settings.maintenance_window)  # the L2 has no prop for it

    @staticmethod
    def _dataset_keys(source: JobSource) -> dict[str, str]:
        """The dataset a source carries, and its files' digest: the entrypoint refuses a zip whose files differ, and a
        dataset.json or schema change shows in the diff of every job that carries it. A routed source
        (glue_jobs/job_arguments.py ROUTED_KEYS) names its field, its routes, and each dataset's digest and lake path
        under keys of their own, so a change to one dataset shows as that key's change."""
        if source.route is None:
            return {"dataset": source.dataset.name, "dataset_digest": source.dataset.digest, "lake_path": source.lake_path}
        keys = {"route_field": source.route.field,
                "routes": json.dumps(dict(source.route.values), sort_keys=True, separators=(",", ":")),
                "datasets": ",".join(c.dataset.name for c in source.route.datasets)}
        for carried in source.route.datasets:
            keys[f"dataset_digest.{carried.dataset.name}"] = carried.dataset.digest
            keys[f"lake_path.{carried.dataset.name}"] = source.lake_path_of(carried)
        return keys

    def _grant_storage(self, sources: Sequence[JobSource], glue_version: str) -> None:
        # Replays delete a batch's earlier partial output, so the job may delete under its prefixes.
        granted = set()
        for source in sources:
            where = source.locations
            for bucket, prefix in (
                *((where.lake_bucket, carried.lake_prefix) for carried in source.carried),
                (where.dead_letter_bucket, f"{where.dead_letter_prefix}/{source.name}"),
                (where.checkpoint_bucket, f"{where.checkpoint_prefix}/{source.name}"),
            ):
                if (bucket.node.path, prefix) not in granted:  # two sources of one dataset share its lake prefix
                    granted.add((bucket.node.path, prefix))
                    grant_prefix(self.role, bucket, prefix, glue_version=glue_version)

    @staticmethod
    def _source_options(settings: StreamingJobConfig, source: JobSource) -> dict[str, str]:
        kafka = source.kafka
        if source.stream is not None:
            return {
                "starting_position": settings.kinesis_starting_position,
                "max_fetch_records_per_shard": str(settings.max_fetch_records_per_shard),
                "max_fetch_time_ms": str(settings.max_fetch_time_ms),  # sized with it (infra.config)
                "source_table": source.catalog.source_table_name,
                # A batch read from fewer shards than the cores is spread over them (glue_jobs/sources.spread).
                "min_partitions": str(settings.executor_cores),
            }
        return {
            "starting_position": settings.kafka_starting_offsets,
            "max_offsets_per_trigger": str(settings.max_offsets_per_trigger),
            "bootstrap_servers": kafka.bootstrap_servers,
            "topic": kafka.topic,
            "registry_name": kafka.registry_name,
            **({"schema_name": kafka.schema_name} if source.route is None else {}),
            "kafka_auth": "iam",  # SASL/IAM on 9098 (glue_jobs/glue_entry.kafka_reader_options)
            # Spark's assign (this job's partition group) or subscribe ("all"), and minPartitions.
            "partitions": ",".join(map(str, kafka.partitions)) if kafka.partitions else "all",
            "min_partitions": "none" if kafka.min_partitions is None else str(kafka.min_partitions),
        }

    @staticmethod
    def _iceberg_keys(source: JobSource) -> dict[str, str]:
        """An Iceberg dataset's source (glue_jobs/job_arguments.py ICEBERG_KEYS): the table it creates and commits to, and
        its location, a folder of the dataset's lake prefix (glue_jobs/schema.ICEBERG_TABLE_FOLDER)."""
        if source.route is not None or source.dataset.table_format != "iceberg":
            return {}
        return {"lake_table": source.catalog.lake_table_name,
                "lake_table_location": f"{source.lake_path}/{ICEBERG_TABLE_FOLDER}"}

    def _grant_catalog(self, stack: cdk.Stack, sources: Sequence[JobSource]) -> None:
        arn = f"arn:{stack.partition}:glue:{stack.region}:{stack.account}"
        database = sources[0].catalog.database_name

        def table(name: str) -> str:
            return f"{arn}:table/{database}/{name}"

        iceberg = sorted({c.lake_table_name for s in sources for c in s.carried if c.dataset.table_format == "iceberg"})
        if iceberg:
            # Iceberg's GlueCatalog creates the table on the job's first start (CREATE TABLE IF NOT EXISTS) and
            # commits each append as an UpdateTable of its metadata location (optimistic, on the table's version).
            # The stack cannot create it: AWS::Glue::Table's IcebergStructField.Type is a string (the resource
            # schema cfn-lint bundles), with no documented form for a list of structs such as orders' items.
            self.role.add_to_principal_policy(iam.PolicyStatement(
                sid="CommitIcebergLakeTable",
                actions=["glue:CreateTable", "glue:UpdateTable"],
                resources=[f"{arn}:catalog", f"{arn}:database/{database}", *map(table, iceberg)],
            ))
        tables = [s.catalog.source_table_name for s in sources if s.catalog.source_table_name]
        tables += [c.lake_table_name for s in sources for c in s.carried]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadOwnCatalogTables",
                actions=["glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartitions"],
                resources=[f"{arn}:catalog", f"{arn}:database/{database}", *map(table, dict.fromkeys(tables))],
            )
        )
        grant_put_metric_data(self.role, "PublishBatchMetrics")

    def _grant_kafka(self, stack: cdk.Stack, sources: Sequence[KafkaSource]) -> None:
        """Read access to each Kafka source's topic and schema, on the environment's one MSK cluster (whose
        connections, subnets and security groups every Kafka source of the job shares)."""
        kafka = sources[0]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="MskConnect",
                actions=["kafka-cluster:Connect", "kafka-cluster:DescribeCluster"],
                resources=[kafka.cluster_arn],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="MskReadTopic",
                actions=["kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"],
                resources=[kafka_arn(stack, kafka.cluster_arn, "topic", topic) for topic in dict.fromkeys(k.topic for k in sources)],
            )
        )
        groups = kafka_arn(stack, kafka.cluster_arn, "group", "*")
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="MskConsumerGroups",
                actions=["kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"],
                resources=[groups],
            )
        )
        acknowledge_wildcard_resource(
            self.role, groups, "Spark's Kafka source generates a fresh consumer group name per query, so only the cluster can be fixed"
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadEventSchema",
                actions=["glue:GetSchema", "glue:GetSchemaByDefinition"],
                resources=[kafka.registry_arn, *dict.fromkeys(arn for k in sources for arn in k.schema_arns)],
            )
        )
        # The deserializer looks a record's schema version up by its SchemaVersionId, a call that names no
        # registry or schema: AWS's consumer example grants glue:GetSchemaVersion on "*" (Schema Registry
        # "Getting started", code example 15), and the library's maintainers answer "you would have to use
        # the * permissions for getSchemaVersion" (awslabs/aws-glue-schema-registry issues 68, 151).
        self.role.add_to_principal_policy(
            iam.PolicyStatement(sid="ReadSchemaVersionsById", actions=["glue:GetSchemaVersion"], resources=["*"])
        )
        # Glue creates the connection's network interfaces at run start with the job's role ("AWS Glue sets up
        # elastic network interfaces ... Security groups specified in the AWS Glue connection are applied on each
        # of the elastic network interfaces", Glue "Connecting to data"). CreateNetworkInterface takes the
        # network-interface and subnet resource types (required) and security-group (optional);
        # DeleteNetworkInterface takes network-interface (Service Authorization Reference, Amazon EC2): so both
        # name the connections' subnets and security groups, and only the interface ids, unknown before the
        # run, are a wildcard. The Describe calls support no resource-level permissions.
        ec2_arn = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}"
        enis = f"{ec2_arn}:network-interface/*"
        acknowledge_wildcard_resource(
            self.role, enis, "Glue creates the connection's network interfaces at run start; their ids are unknown before, and creation is bound to the connection's subnet and security group"
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="GlueConnectionCreateEni",
                actions=["ec2:CreateNetworkInterface"],
                resources=[
                    enis,
                    *(f"{ec2_arn}:subnet/{subnet}" for subnet in kafka.connection_subnet_ids),
                    *(f"{ec2_arn}:security-group/{group}" for group in kafka.connection_security_group_ids),
                ],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(sid="GlueConnectionDeleteEni", actions=["ec2:DeleteNetworkInterface"], resources=[enis])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="GlueConnectionNetworking",
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeVpcEndpoints",
                    "ec2:DescribeRouteTables",
                ],
                resources=["*"],
            )
        )
        # DescribeVpcAttribute is the one Describe call with a resource type (vpc; Service Authorization
        # Reference for EC2 as bundled by parliament 1.6.4, tests/infra/test_iam_lint.py), so it names the VPC.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="GlueConnectionVpcAttribute",
                actions=["ec2:DescribeVpcAttribute"],
                resources=[f"{ec2_arn}:vpc/{kafka.connection_vpc_id}"],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="GlueConnectionEniTags",
                actions=["ec2:CreateTags", "ec2:DeleteTags"],
                resources=[enis],
                conditions={"ForAllValues:StringEquals": {"aws:TagKeys": ["aws-glue-service-resource"]}},
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadGlueConnection",
                actions=["glue:GetConnection"],
                resources=[
                    f"arn:{stack.partition}:glue:{stack.region}:{stack.account}:catalog",
                    *(connection.connection_arn for connection in kafka.connections),
                ],
            )
        )


def _maintenance_window(window: str) -> str:
    """Config 'SUN:03' -> Glue's 'Sun:3' (MaintenanceWindow is '<Day>:<hour>' in UTC)."""
    day, hour = window.split(":")
    return f"{day.capitalize()}:{int(hour)}"
