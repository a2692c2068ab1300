"""The hourly compaction Glue job (glueetl), its role, and the schedule that starts it.

- Flex execution (config `compaction.flex`, default on outside prod): Flex runs on spare capacity,
  at a lower DPU rate, and may start later; fine for an hourly job with a grace period, not for prod
  where the compaction-missed alarm should mean something.
- One run at a time (MaxConcurrentRuns 1): the journal protects data either way, but overlapping
  runs would only fight over the same partitions.
- Partition metadata: the lake table uses partition projection, so compaction (which only replaces
  files inside existing event_date/event_hour folders) never needs to register partitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from glue_jobs.metrics import METRICS_NAMESPACE
from infra import job_assets
from infra.config import CompactionConfig
from infra.glue_security import GlueJobSecurity
from infra.job_iam import (
    acknowledge_glue_job_role,
    add_spark_ui,
    grant_prefix,
    grant_put_metric_data,
    override_default_arguments,
)


class CompactionJob(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        environment: str,
        settings: CompactionConfig,
        lake_bucket: s3.IBucket,
        lake_prefixes: Mapping[str, str],
        temp_bucket: s3.IBucket,
        security: GlueJobSecurity,
        spark_ui_bucket: s3.IBucket | None = None,
        iceberg_tables: Mapping[str, tuple[str, str, str]] | None = None,
    ) -> None:
        """`iceberg_tables`: {dataset: (database, table, location)} of the Iceberg datasets, maintained instead of
        compacted (compaction/iceberg_maintenance.py); their prefixes are in `lake_prefixes` too (the grants)."""
        super().__init__(scope, id_)
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("glue.amazonaws.com"), description="Glue hourly compaction job"
        )
        # Compaction rewrites files in place: read, write and delete under the lake tables' prefixes only.
        for prefix in lake_prefixes.values():
            grant_prefix(self.role, lake_bucket, prefix, glue_version=settings.glue_version)
        grant_prefix(self.role, temp_bucket, "glue-temp/compaction", glue_version=settings.glue_version)
        security.grant_job(self.role)
        grant_put_metric_data(self.role, "PublishCompactionMetrics")
        # {dataset: lake path}: one run compacts every Parquet dataset's table, each with its own key and journal.
        iceberg_tables = dict(iceberg_tables or {})
        self.lake_paths = {dataset: f"s3://{lake_bucket.bucket_name}/{prefix}" for dataset, prefix in lake_prefixes.items()
                           if dataset not in iceberg_tables}
        iceberg = {dataset: {"table": f"{database}.{table}", "location": location}
                   for dataset, (database, table, location) in iceberg_tables.items()}
        if iceberg:
            stack = cdk.Stack.of(self)
            arn = f"arn:{stack.partition}:glue:{stack.region}:{stack.account}"
            # Iceberg's GlueCatalog loads each table and commits each procedure as an UpdateTable.
            self.role.add_to_principal_policy(iam.PolicyStatement(
                sid="MaintainIcebergTables",
                actions=["glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"],
                resources=[f"{arn}:catalog", *sorted({f"{arn}:database/{d}" for d, _, _ in iceberg_tables.values()}),
                           *(f"{arn}:table/{d}/{t}" for d, t, _ in iceberg_tables.values())],
            ))
        self.default_arguments = {
            "--lake_tables": json.dumps(self.lake_paths, separators=(",", ":")),
            "--iceberg_tables": json.dumps(iceberg, separators=(",", ":")),
            "--iceberg_snapshot_retention_hours": str(settings.iceberg_snapshot_retention_hours),
            **({"--datalake-formats": "iceberg"} if iceberg else {}),
            "--environment": environment,
            "--target_file_mb": str(settings.target_file_mb),
            "--grace_minutes": str(settings.grace_minutes),
            "--lookback_hours": str(settings.lookback_hours),
            "--metrics_namespace": METRICS_NAMESPACE,
            "--metrics_region": cdk.Aws.REGION,
            "--TempDir": f"s3://{temp_bucket.bucket_name}/glue-temp/compaction/",
        }
        self.logging = security.job_logging(self, "compaction", self.role, settings.glue_version)
        job_class = glue.PySparkFlexEtlJob if settings.flex else glue.PySparkEtlJob
        self.job = job_class(
            self,
            "Job",
            description=f"{environment}: hourly lake compaction (crash-safe, deduplicating)",
            role=self.role,
            default_arguments=self.default_arguments,
            max_retries=0,
            timeout=cdk.Duration.minutes(settings.timeout_minutes),
            # jvm/glue-functions: BulkDelete deletes a partition's inputs in one JVM call per chunk
            # (glue_jobs/lake/storage.py HadoopStorage.delete_files); Glue loads it from --extra-jars (the L2 sets it, and
            # binding the asset grants the role s3:GetObject on that one object).
            extra_jars=[job_assets.functions_jar(self)],
            **job_assets.common_job_props(
                self,
                "compaction",
                glue_version=settings.glue_version,
                worker_type=settings.worker_type,
                workers=settings.workers,
                security_configuration=security.configuration,
                logging=self.logging,
            ),
        )
        override_default_arguments(self.job, self.logging.arguments)  # the L2 reserves the logging ones
        acknowledge_glue_job_role(self.role, uses_connection=False)
        add_spark_ui(self.job, self.role, spark_ui_bucket, "compaction", glue_version=settings.glue_version)
        self.trigger = glue.CfnTrigger(
            self,
            "HourlyTrigger",
            type="SCHEDULED",
            schedule=settings.schedule,
            start_on_creation=True,
            description="Start the compaction every hour; the job itself picks the hours that need it",
            actions=[glue.CfnTrigger.ActionProperty(job_name=self.job.job_name)],
        )
