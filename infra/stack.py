"""The per-environment stack: composes the units and wires them together, nothing else."""

from __future__ import annotations

import dataclasses

import aws_cdk as cdk
from constructs import Construct

from glue_jobs import datasets
from infra.catalog import Catalog
from infra.compaction_job import CompactionJob
from infra.config import EnvironmentConfig, RouteConfig
from infra.constants import pascal
from infra.glue_security import GlueJobSecurity
from infra.job_keeper import JobKeeper
from infra.lake_formation import DatasetGrants, LakeFormation
from infra.monitoring import Monitoring, MskSignals, StreamingJobSignals
from infra.msk import KafkaSourceInfrastructure, producer_policy
from infra.network import Network
from infra.readers import DatasetTables, Readers
from infra.storage import Storage, lake_prefix_of
from infra.streaming_job import (
    CarriedDataset,
    CatalogNames,
    JobSource,
    KafkaSource,
    LakeLocations,
    SourceRoute,
    StreamingJob,
)
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
        # Only a Glue connection puts workers in a VPC, and only the MSK job has one: an environment
        # without MSK gets no VPC, NAT gateway or endpoints (docs/infrastructure.md "Network").
        self.network = (
            Network(
                self,
                "Network",
                settings=config.network,
                flow_log_bucket=self.storage.access_log_bucket,
                flow_log_prefix=self.storage.flow_log_prefix,
            )
            if config.msk.enabled
            else None
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
        # The datasets this environment's sources carry, read (and checked) once from datasets/, each with the table
        # format this environment gives it (config `table_formats` over dataset.json): everything below reads it here.
        self.datasets = {name: dataclasses.replace(dataset, table_format=config.table_format(name, dataset.table_format))
                         for name, dataset in ((n, datasets.load(n)) for n in config.datasets)}
        self.catalog = Catalog(
            self,
            "Catalog",
            project=project,
            environment=config.name,
            lake_bucket=self.storage.lake_bucket,
            datasets=list(self.datasets.values()),
            carried=config.carried,
            routed=config.routed,
            dead_letter_bucket=self.storage.dead_letter_bucket,
            dead_letter_prefix=self.storage.dead_letter_prefix,
            dead_letter_retention_days=config.storage.dead_letter_expiration_days,
            streams=self.streams.streams,
            removal_policy=self.removal_policy,
        )
        self.storage.add_lake_prefix_rules([lake_prefix_of(name) for name in self.datasets], config.storage)
        self.readers = Readers(
            self, "Readers", name=f"{project}-{config.name}-readers", settings=config.readers,
            database=self.catalog.database_name, data_key=self.storage.data_key, lake_bucket=self.storage.lake_bucket,
            dead_letter_bucket=self.storage.dead_letter_bucket, access_log_bucket=self.storage.access_log_bucket,
            datasets={name: DatasetTables(
                dataset=dataset, lake_table=self.catalog.lake_table_names[name], lake_prefix=lake_prefix_of(name),
                dead_letter_tables=self.catalog.dead_letter_tables_of(name),
                dead_letter_prefixes={folder: f"{self.storage.dead_letter_prefix}/{folder}"
                                      for folder in self.catalog.dead_letter_tables_of(name)},
            ) for name, dataset in self.datasets.items()},
            removal_policy=self.removal_policy,
        )
        self._jobs(config)
        self.lake_formation = self._lake_formation(config) if config.lake_formation.enabled else None
        retention = self._source_retention_hours(config)
        self.job_keeper = JobKeeper(self, "JobKeeper", jobs={name: job.job for name, job in self.job_groups.items()},
                                    maintenance_windows={g.name: g.settings.maintenance_window for g in config.job_groups},
                                    # a job's records start to expire with its shortest-kept source's
                                    retention_hours={g.name: min(retention[s] for s in g.sources) for g in config.job_groups},
                                    removal_policy=self.removal_policy,
                                    checkpoint_bucket=self.storage.checkpoint_bucket.bucket_name,
                                    environment_tags=dict(config.tags))
        # The first deploy starts the jobs (the keeper's deploy resources): only once what they read at start exists,
        # the streams and the topic, the catalog tables and every registered schema version.
        # With Lake Formation on, the jobs' grants too: a job that starts before them is refused its catalog calls.
        for dependency in (self.streams, self.catalog, self.msk, self.lake_formation):
            if dependency is not None:
                for deploy in self.job_keeper.deploys.values():
                    deploy.node.add_dependency(dependency)
        # And its own job's role with every policy of the role (the default one and the overflow ones CDK splits off at
        # synth) and its log groups: CloudFormation creates what does not depend on each other in parallel, and a run
        # that starts before its policy exists is refused its first calls.
        for name, deploy in self.job_keeper.deploys.items():
            job = self.job_groups[name]
            deploy.node.add_dependency(job.role, *job.logging.log_groups)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            environment=config.name,
            alarms=config.alarms,
            window_size_seconds=config.streaming.window_size_seconds,
            notification_emails=config.notification_emails,
            stream_names={name: stream.stream_name for name, stream in self.streams.streams.items()},
            provisioned_shards={s.name: s.shard_count for s in config.kinesis_streams if s.capacity_mode == "provisioned"},
            streaming_jobs=[
                StreamingJobSignals(
                    source_name=source,
                    job_name=job.job.job_name,
                    source_type=job.source_types[source],
                    stream_name=self.streams.streams[source].stream_name if source in self.streams.streams else None,
                    retention_ms=(config.msk.topic_retention_hours * 3_600_000
                                  if source in config.msk.source_names else None),
                    source_retention_hours=retention[source],
                    **self._job_signals(config.job_of(source), retention),
                )
                for source, job in self.streaming_jobs.items()
            ],
            datasets={d: config.sources_of(d) for d in config.datasets},
            routed_sources=tuple(config.routed),
            compaction_job_name=self.compaction.job.job_name,
            msk=(
                MskSignals(self.msk.cluster_name, config.msk.broker_count)
                if self.msk is not None and config.msk.mode == "provisioned"
                else None
            ),
            removal_policy=self.removal_policy,
            keeper_function_name=self.job_keeper.function.function_name,
            athena_workgroup=self.readers.workgroup.name,
            lake_bucket_name=self.storage.lake_bucket.bucket_name,
        )
        self._outputs()

    @staticmethod
    def _job_signals(group, retention: dict[str, int]) -> dict:
        """What a declared job adds to each of its sources' signals: its name (its alarms are one set per job), that
        it is shared, its own window, and its sources' shortest retention. Nothing for a job of one source."""
        if not group.declared:
            return {}
        return {"job_key": group.name, "shared": len(group.sources) > 1,
                "window_size_seconds": group.settings.window_size_seconds,
                "job_retention_hours": min(retention[s] for s in group.sources)}

    @staticmethod
    def _source_retention_hours(config: EnvironmentConfig) -> dict[str, int]:
        """How long each source keeps a record: the Kinesis stream's retention, the MSK topic's retention.hours."""
        hours = {s.name: s.retention_hours for s in config.kinesis_streams}
        return hours | {source: config.msk.topic_retention_hours for source in config.msk.source_names}

    def _jobs(self, config: EnvironmentConfig) -> None:
        storage, catalog = self.storage, self.catalog
        self.glue_security = GlueJobSecurity(
            self, "GlueSecurity", environment=config.name, data_key=storage.data_key, removal_policy=self.removal_policy
        )
        self.streaming_jobs: dict[str, StreamingJob] = {}  # source name -> the job that runs it
        self.job_groups: dict[str, StreamingJob] = {}  # job name -> job (a job of one source is named after it)
        locations = {name: LakeLocations(
            lake_bucket=storage.lake_bucket,
            lake_prefix=lake_prefix_of(name),
            dead_letter_bucket=storage.dead_letter_bucket,
            dead_letter_prefix=storage.dead_letter_prefix,
            checkpoint_bucket=storage.checkpoint_bucket,
            checkpoint_prefix=storage.checkpoint_prefix,
            spark_ui_bucket=storage.job_assets_bucket,
        ) for name in self.datasets}

        def job_source(source: str, settings) -> JobSource:
            route = config.routes.get(source)
            if source in config.msk.source_names and config.msk.routed:
                # A routed topic: each frame goes to the dataset whose registry schema wrote it (SchemaRoutes).
                route = RouteConfig(config.routed[source], tuple(sorted(
                    (catalog.dataset_schemas[name][0], name) for name in config.msk.datasets)))
            dataset = None if route is not None else self.datasets[config.carried[source][0]]
            reads = {"stream": self.streams.streams[source]} if source in self.streams.streams else {
                "kafka": KafkaSource(
                    cluster_arn=self.msk.cluster_arn,
                    bootstrap_servers=self.msk.bootstrap_servers,
                    topic=self.msk.topic_name,
                    connections=self.msk.job_connections,
                    connection_subnet_ids=self.msk.connection_subnet_ids,
                    connection_security_group_ids=self.msk.connection_security_group_ids,
                    connection_vpc_id=self.network.vpc.vpc_id,
                    registry_arn=catalog.registry_arn,
                    schema_arns=tuple(catalog.dataset_schemas[name][1] for name in config.msk.carried),
                    registry_name=catalog.registry_name,
                    schema_name=None if config.msk.routed else catalog.dataset_schemas[config.msk.dataset][0],
                    partitions=config.msk.partitions_of(source),
                    min_partitions=config.msk.min_partitions_for(source, settings.worker_type, settings.max_workers),
                )}
            if route is None:
                return JobSource(source, dataset, locations[dataset.name],
                                 CatalogNames(catalog.database_name, catalog.source_table_names.get(source),
                                              catalog.lake_table_names[dataset.name]), **reads)
            carried = tuple(CarriedDataset(self.datasets[name], lake_prefix_of(name), catalog.lake_table_names[name])
                            for name in route.datasets)
            return JobSource(source, None, locations[route.datasets[0]],
                             CatalogNames(catalog.database_name, catalog.source_table_names.get(source),
                                          catalog.lake_table_names[route.datasets[0]]),
                             route=SourceRoute(route.field, route.values, carried), **reads)

        for group in config.job_groups:
            # A job of one source keeps the id it had before jobs were declared (StreamingJob<Source>), so it is
            # updated in place, not replaced; a declared job's id is its name's.
            job = StreamingJob(
                self,
                f"StreamingJob{pascal(group.name)}",
                environment=config.name,
                name=group.name,
                sources=[job_source(source, group.settings) for source in group.sources],
                settings=group.settings,
                security=self.glue_security,
            )
            self.job_groups[group.name] = job
            for source in group.sources:
                self.streaming_jobs[source] = job
        if self.msk is not None:
            self.kafka_producer_policy = producer_policy(
                self, "KafkaProducerPolicy", cluster_arn=self.msk.cluster_arn, topic=self.msk.topic_name,
                registry_arn=catalog.registry_arn,
                schema_arns=[catalog.dataset_schemas[name][1] for name in config.msk.carried])
        self.compaction = CompactionJob(
            self,
            "Compaction",
            environment=config.name,
            settings=config.compaction,
            lake_bucket=storage.lake_bucket,
            lake_prefixes={name: lake_prefix_of(name) for name in self.datasets},
            temp_bucket=storage.temp_bucket,
            security=self.glue_security,
            spark_ui_bucket=storage.job_assets_bucket,
            iceberg_tables={name: (catalog.database_name, catalog.lake_table_names[name], catalog.lake_locations[name])
                            for name, dataset in self.datasets.items() if dataset.table_format == "iceberg"},
        )

    def _lake_formation(self, config: EnvironmentConfig) -> LakeFormation:
        """Lake Formation mode (docs/lake-formation.md): the lake bucket registered, each role granted its tables."""
        catalog = self.catalog
        return LakeFormation(
            self, "LakeFormation", environment=config.name, database=catalog.database_name,
            lake_bucket=self.storage.lake_bucket, data_key=self.storage.data_key,
            compaction_role=self.compaction.role, iceberg_tables_created=config.lake_formation.iceberg_tables_created,
            catalog_resources=[catalog.database, *catalog.tables.values()],
            datasets={name: DatasetGrants(
                table_format=dataset.table_format, lake_table=catalog.lake_table_names[name],
                lake_prefix=lake_prefix_of(name),
                source_tables={s: t for s, t in catalog.source_table_names.items() if name in config.carried[s]},
                dead_letter_tables=catalog.dead_letter_tables_of(name),
                job_roles={s: job.role for s, job in self.streaming_jobs.items() if name in config.carried[s]},
                job_names={s: job.name for s, job in self.streaming_jobs.items() if name in config.carried[s]},
                reader_policy=self.readers.policies[name],
                routed_sources=frozenset(s for s in config.routed if name in config.carried[s]),
            ) for name, dataset in self.datasets.items()},
        )

    def _outputs(self) -> None:
        """Every name an operations tool needs, read from the stack outputs (CloudFormation DescribeStacks).

        Keys follow operations/resources.py (the tools' only list of keys); per-source keys end in the
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
            "CatalogDatabaseName": (catalog.database_name, "Data Catalog database"),
            "SchemaRegistryName": (catalog.registry_name, "Glue Schema Registry"),
        }
        if catalog.schema_name is not None:  # clickstream's schema, under the key the tools read before datasets
            outputs["EventSchemaName"] = (catalog.schema_name, "event schema in the registry")
        if "clickstream" in catalog.lake_table_names:  # the key the tools read before datasets
            outputs["LakeTableName"] = (catalog.lake_table_names["clickstream"], "lake table (partition projection)")
        for dataset, (schema_name, *_) in catalog.dataset_schemas.items():
            outputs[f"SchemaName{pascal(dataset)}"] = (schema_name, f"registry schema of dataset {dataset}")
        for dataset, table in catalog.lake_table_names.items():
            outputs[f"LakeTableName{pascal(dataset)}"] = (table, f"lake table of dataset {dataset}")
            outputs[f"LakePath{pascal(dataset)}"] = (catalog.lake_locations[dataset], f"lake files of dataset {dataset}")
        for source, stream in self.streams.streams.items():
            outputs[f"KinesisStreamName{pascal(source)}"] = (stream.stream_name, f"Kinesis stream of source {source}")
        for source in self.config.source_names:
            outputs[f"DeadLetterPath{pascal(source)}"] = (
                f"s3://{storage.dead_letter_bucket.bucket_name}/{storage.dead_letter_prefix}/{source}",
                f"dead letters of {source} (ingest_date=YYYY-MM-DD partitions below)",
            )
            outputs[f"CheckpointPath{pascal(source)}"] = (
                f"s3://{storage.checkpoint_bucket.bucket_name}/{storage.checkpoint_prefix}/{source}/",
                f"Spark checkpoint of the {source} streaming job",
            )
        for source, table in catalog.source_table_names.items():
            outputs[f"SourceTableName{pascal(source)}"] = (table, f"catalog source table of {source}")
        for folder, table in catalog.dead_letter_table_names.items():
            outputs[f"DeadLetterTableName{pascal(folder.replace('/', '-'))}"] = (table, f"dead-letter table of {folder}")
        if self.network is not None:
            outputs["VpcId"] = (self.network.vpc.vpc_id, "VPC of the Glue connections")
            outputs["GlueSecurityGroupId"] = (self.network.glue_security_group.security_group_id, "security group of Glue workers")
        if self.msk is not None:
            outputs["MskClusterArn"] = (self.msk.cluster_arn, f"MSK cluster ({self.msk.mode})")
            outputs["MskClusterName"] = (self.msk.cluster_name, "MSK cluster name (CloudWatch dimension)")
            outputs["MskBootstrapServers"] = (self.msk.bootstrap_servers, "SASL/IAM bootstrap brokers")
            outputs["MskTopicName"] = (self.msk.topic_name, f"topic of source(s) {', '.join(self.config.msk.source_names)}")
            outputs["GlueKafkaConnectionName"] = (self.msk.connection_name, "Glue KAFKA connection")
            outputs["KafkaProducerPolicyArn"] = (
                self.kafka_producer_policy.managed_policy_arn, "attach to a producer's role to write the topic")
        for source, job in self.streaming_jobs.items():
            outputs[f"StreamingJobName{pascal(source)}"] = (job.job.job_name, f"Glue streaming job of {source}")
        outputs["CompactionJobName"] = (self.compaction.job.job_name, "Glue hourly compaction job")
        outputs["AlarmTopicArn"] = (self.monitoring.topic.topic_arn, "SNS topic of every alarm")
        outputs["ReadersWorkGroupName"] = (self.readers.workgroup.name, "Athena workgroup of the lake's readers (enforced settings)")
        outputs["AthenaResultsBucketName"] = (self.readers.results_bucket.bucket_name, "Athena query results (expire)")
        for dataset, policy in self.readers.policies.items():
            outputs[f"ReaderPolicyArn{pascal(dataset)}"] = (
                policy.managed_policy_arn, f"attach to a reader's role to query dataset {dataset} through the workgroup")
        if self.lake_formation is not None:
            for dataset, role in self.lake_formation.reader_roles.items():
                outputs[f"ReaderRoleArn{pascal(dataset)}"] = (
                    role.role_arn, f"assume to query dataset {dataset}: the role its Lake Formation grants name")
        for key, (value, description) in outputs.items():
            cdk.CfnOutput(self, key, value=value, description=description)
