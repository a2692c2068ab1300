"""The per-environment stack: composes the units and wires them together, nothing else."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from infra.catalog import Catalog, KafkaTableSource
from infra.config import EnvironmentConfig
from infra.msk import KafkaSourceInfrastructure
from infra.network import Network
from infra.storage import Storage
from infra.streams import Streams


class StreamingLakeStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, config: EnvironmentConfig, project: str, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.config = config
        self.removal_policy = (
            cdk.RemovalPolicy.RETAIN if config.removal_policy == "retain" else cdk.RemovalPolicy.DESTROY
        )
        for key, value in sorted(config.tags.items()):
            cdk.Tags.of(self).add(key, value)

        self.storage = Storage(
            self,
            "Storage",
            project=project,
            environment=config.name,
            settings=config.storage,
            removal_policy=self.removal_policy,
        )
        self.streams = Streams(
            self,
            "Streams",
            project=project,
            environment=config.name,
            streams=config.kinesis_streams,
            encryption_key=self.storage.data_key,
            removal_policy=self.removal_policy,
        )
        self.network = Network(
            self,
            "Network",
            settings=config.network,
            flow_log_bucket=self.storage.access_log_bucket,
            flow_log_prefix=self.storage.flow_log_prefix,
            kinesis_endpoint=bool(config.kinesis_streams),
        )
        self.msk = (
            KafkaSourceInfrastructure(
                self,
                "Msk",
                project=project,
                environment=config.name,
                settings=config.msk,
                vpc=self.network.vpc,
                subnets=self.network.private_subnets,
                client_security_group=self.network.glue_security_group,
                encryption_key=self.storage.data_key,
                removal_policy=self.removal_policy,
            )
            if config.msk.enabled
            else None
        )
        self.catalog = Catalog(
            self,
            "Catalog",
            project=project,
            environment=config.name,
            lake_bucket=self.storage.lake_bucket,
            lake_prefix=self.storage.lake_prefix,
            dead_letter_bucket=self.storage.dead_letter_bucket,
            dead_letter_prefix=self.storage.dead_letter_prefix,
            dead_letter_retention_days=config.storage.dead_letter_expiration_days,
            streams=self.streams.streams,
            kafka=(
                KafkaTableSource(self.msk.source_name, self.msk.topic_name, self.msk.connection_name)
                if self.msk
                else None
            ),
            removal_policy=self.removal_policy,
        )
        self._outputs()

    def _outputs(self) -> None:
        """Every name an operations tool needs, read from the stack outputs (CloudFormation DescribeStacks).

        Keys follow tools/resources.py (the tools' only list of keys); per-source keys end in the
        PascalCase source name.
        """
        storage, catalog = self.storage, self.catalog
        outputs: dict[str, tuple[str, str]] = {
            "LakeBucketName": (storage.lake_bucket.bucket_name, f"lake data under {storage.lake_prefix}/"),
            "DeadLetterBucketName": (storage.dead_letter_bucket.bucket_name, f"dead letters under {storage.dead_letter_prefix}/<source>/"),
            "CheckpointBucketName": (storage.checkpoint_bucket.bucket_name, f"{storage.checkpoint_prefix}/<source>/ and {storage.temp_prefix}/"),
            "JobAssetsBucketName": (storage.job_assets_bucket.bucket_name, "job scripts, jars, Spark UI logs"),
            "AccessLogBucketName": (storage.access_log_bucket.bucket_name, "S3 access logs and VPC flow logs"),
            "DataKeyArn": (storage.data_key.key_arn, "KMS key for data at rest"),
            "VpcId": (self.network.vpc.vpc_id, "VPC of the Glue connection"),
            "GlueSecurityGroupId": (self.network.glue_security_group.security_group_id, "security group of Glue workers"),
            "CatalogDatabaseName": (catalog.database_name, "Data Catalog database"),
            "LakeTableName": (catalog.lake_table_name, "lake table (partition projection)"),
            "SchemaRegistryName": (catalog.registry_name, "Glue Schema Registry"),
            "EventSchemaName": (catalog.schema_name, "event schema in the registry"),
        }
        for source, stream in self.streams.streams.items():
            outputs[f"KinesisStreamName{_pascal(source)}"] = (stream.stream_name, f"Kinesis stream of source {source}")
        for source in self.config.source_names:
            outputs[f"DeadLetterPath{_pascal(source)}"] = (
                f"s3://{storage.dead_letter_bucket.bucket_name}/{storage.dead_letter_prefix}/{source}",
                f"dead letters of {source} (ingest_date=YYYY-MM-DD partitions below)",
            )
            outputs[f"CheckpointPath{_pascal(source)}"] = (
                f"s3://{storage.checkpoint_bucket.bucket_name}/{storage.checkpoint_prefix}/{source}/",
                f"Spark checkpoint of the {source} streaming job",
            )
        for source, table in catalog.source_table_names.items():
            outputs[f"SourceTableName{_pascal(source)}"] = (table, f"catalog source table of {source}")
        for source, table in catalog.dead_letter_table_names.items():
            outputs[f"DeadLetterTableName{_pascal(source)}"] = (table, f"dead-letter table of {source}")
        if self.msk is not None:
            outputs["MskClusterArn"] = (self.msk.cluster_arn, f"MSK cluster ({self.msk.mode})")
            outputs["MskClusterName"] = (self.msk.cluster_name, "MSK cluster name (CloudWatch dimension)")
            outputs["MskBootstrapServers"] = (self.msk.bootstrap_servers, "SASL/IAM bootstrap brokers")
            outputs["MskTopicName"] = (self.msk.topic_name, f"topic of source {self.msk.source_name}")
            outputs["GlueKafkaConnectionName"] = (self.msk.connection_name, "Glue KAFKA connection")
        for key, (value, description) in outputs.items():
            cdk.CfnOutput(self, key, value=value, description=description)


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("_", "-").split("-"))
