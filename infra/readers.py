"""Who reads the lake, per environment (docs/readers.md): an Athena workgroup with enforced settings, saved queries per
dataset to start from, and a managed policy per dataset that a team attaches to its readers' roles.

- Workgroup `<project>-<env>-readers`, EnforceWorkGroupConfiguration true (a query cannot choose its own results
  location, encryption or limit): results under `athena-results/` of a bucket of their own, SSE-KMS with the data
  key, expiring after `readers.results_expiration_days`; a query that scans more than
  `readers.bytes_scanned_cutoff_mb` is cancelled (BytesScannedCutoffPerQuery, minimum 10,000,000 bytes in the
  AWS::Athena::WorkGroup resource schema); CloudWatch metrics on.
- Named queries per dataset: rows per hour (the last day), dead letters by reason (per source of the dataset, the
  last day), freshness (newest event time and arrival time written).
- Reader policy per dataset: query through this workgroup only; read that dataset's table and its sources' dead
  letter tables in the Data Catalog; read (not write) the table's prefix and those dead letters; decrypt with the
  data key; write and read the workgroup's results. Output by the stack (`ReaderPolicy<Dataset>`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_athena as athena
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from glue_jobs.datasets import Dataset
from infra.config import ReadersConfig
from infra.constants import pascal
from infra.nag import acknowledge_wildcard_resource

RESULTS_PREFIX = "athena-results"
MB = 1_000_000  # Athena's cutoff is in bytes; its documented minimum is 10,000,000 (10 MB)
ATHENA_QUERY_ACTIONS = ("athena:StartQueryExecution", "athena:StopQueryExecution", "athena:GetQueryExecution",
                        "athena:GetQueryResults", "athena:GetQueryResultsStream", "athena:ListQueryExecutions",
                        "athena:GetWorkGroup", "athena:BatchGetQueryExecution", "athena:ListNamedQueries",
                        "athena:GetNamedQuery", "athena:BatchGetNamedQuery")


@dataclass(frozen=True)
class DatasetTables:
    """What a dataset's readers query: its lake table and location, its sources' dead-letter tables and locations."""

    dataset: Dataset
    lake_table: str
    lake_prefix: str  # key prefix in the lake bucket (its table's files; an Iceberg table's metadata too)
    # keyed by the folder under the dead-letter prefix: the source's, or a routed source's <source>/<dataset>
    dead_letter_tables: Mapping[str, str]  # folder -> table name
    dead_letter_prefixes: Mapping[str, str]  # folder -> key prefix in the dead-letter bucket


def rows_per_hour(database: str, tables: DatasetTables) -> str:
    """Rows written per hour of event time, the last day (the hour columns are strings in the Parquet lake's
    catalog, a date and an int in an Iceberg table: the filter is on the event time, which both type alike)."""
    event_time = tables.dataset.event_time.field
    return (f'SELECT event_date, event_hour, count(*) AS rows\nFROM "{database}"."{tables.lake_table}"\n'
            f'WHERE "{event_time}" >= current_timestamp - INTERVAL \'1\' DAY\n'
            "GROUP BY event_date, event_hour\nORDER BY event_date DESC, event_hour DESC")


def dead_letters_by_reason(database: str, tables: DatasetTables) -> str:
    """Dead letters per source and reason code, the last two ingest dates."""
    parts = [f"SELECT '{folder.split('/')[0]}' AS source, reason, count(*) AS records\nFROM \"{database}\".\"{table}\"\n"
             "WHERE ingest_date >= date_format(current_date - INTERVAL '1' DAY, '%Y-%m-%d')\nGROUP BY reason"
             for folder, table in sorted(tables.dead_letter_tables.items())]
    return "\nUNION ALL\n".join(parts) + "\nORDER BY records DESC"


def freshness(database: str, tables: DatasetTables) -> str:
    """The newest event time and the newest arrival time in the table, and how old they are."""
    event_time = tables.dataset.event_time.field
    return (f'SELECT max("{event_time}") AS newest_event, max(arrival_time) AS newest_arrival,\n'
            f'       current_timestamp - max(arrival_time) AS since_newest_arrival\n'
            f'FROM "{database}"."{tables.lake_table}"\n'
            f'WHERE "{event_time}" >= current_timestamp - INTERVAL \'2\' DAY')


QUERIES = {"RowsPerHour": ("rows per hour", rows_per_hour), "DeadLettersByReason": ("dead letters by reason", dead_letters_by_reason),
           "Freshness": ("freshness", freshness)}


class Readers(Construct):
    def __init__(self, scope: Construct, id_: str, *, name: str, settings: ReadersConfig, database: str,
                 data_key: kms.IKey, lake_bucket: s3.IBucket, dead_letter_bucket: s3.IBucket,
                 access_log_bucket: s3.IBucket, datasets: Mapping[str, DatasetTables],
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self.results_bucket = s3.Bucket(
            self, "ResultsBucket",
            encryption=s3.BucketEncryption.KMS, encryption_key=data_key, bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True, server_access_logs_bucket=access_log_bucket, server_access_logs_prefix="s3-access/athena-results/",
            lifecycle_rules=[s3.LifecycleRule(id="ExpireQueryResults", expiration=cdk.Duration.days(settings.results_expiration_days),
                                              abort_incomplete_multipart_upload_after=cdk.Duration.days(1))],
            # Query results are copies, kept days: the bucket goes with the environment (it is emptied first only
            # by the expiry; a non-empty bucket stops `cdk destroy`, as the others do).
            removal_policy=removal_policy,
        )
        self.workgroup = athena.CfnWorkGroup(
            self, "WorkGroup", name=name, description=f"Readers of the {stack.stack_name} lake (enforced settings)",
            state="ENABLED", recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=settings.bytes_scanned_cutoff_mb * MB,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version="Athena engine version 3"),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{self.results_bucket.bucket_name}/{RESULTS_PREFIX}/",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=data_key.key_arn),
                ),
            ),
        )
        self.workgroup_arn = f"arn:{stack.partition}:athena:{stack.region}:{stack.account}:workgroup/{name}"
        self.named_queries: dict[str, dict[str, athena.CfnNamedQuery]] = {}
        self.policies: dict[str, iam.ManagedPolicy] = {}
        for dataset, tables in datasets.items():
            queries = {}
            for key, (label, sql) in QUERIES.items():
                query = athena.CfnNamedQuery(
                    self, f"{pascal(dataset)}{key}", database=database, work_group=name,
                    name=f"{dataset}: {label}", description=f"Dataset {dataset}: {label} (docs/readers.md)",
                    query_string=sql(database, tables))
                query.add_resource_dependency(self.workgroup)
                queries[key] = query
            self.named_queries[dataset] = queries
            self.policies[dataset] = self._reader_policy(stack, dataset, tables, database, data_key, lake_bucket,
                                                         dead_letter_bucket)

    def _reader_policy(self, stack: cdk.Stack, dataset: str, tables: DatasetTables, database: str, data_key: kms.IKey,
                       lake_bucket: s3.IBucket, dead_letter_bucket: s3.IBucket) -> iam.ManagedPolicy:
        glue_arn = f"arn:{stack.partition}:glue:{stack.region}:{stack.account}"
        table_names = [tables.lake_table, *sorted(tables.dead_letter_tables.values())]
        prefixes = [(lake_bucket, tables.lake_prefix)] + [(dead_letter_bucket, p) for p in sorted(tables.dead_letter_prefixes.values())]
        statements = [
            iam.PolicyStatement(sid="QueryThroughTheReadersWorkgroup", actions=list(ATHENA_QUERY_ACTIONS),
                                resources=[self.workgroup_arn]),
            iam.PolicyStatement(sid="ReadTheDatasetsTables",
                                actions=["glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartition",
                                         "glue:GetPartitions"],
                                resources=[f"{glue_arn}:catalog", f"{glue_arn}:database/{database}",
                                           *(f"{glue_arn}:table/{database}/{t}" for t in table_names)]),
            iam.PolicyStatement(sid="ReadTheDatasetsFiles", actions=["s3:GetObject"],
                                resources=[bucket.arn_for_objects(f"{prefix}/*") for bucket, prefix in prefixes]),
            *(iam.PolicyStatement(sid=f"ListTheDatasetsPrefix{n}", actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                                  conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}})
              for n, (bucket, prefix) in enumerate(prefixes)),
            iam.PolicyStatement(sid="LocateTheBuckets", actions=["s3:GetBucketLocation"],
                                resources=sorted({b.bucket_arn for b, _ in prefixes} | {self.results_bucket.bucket_arn},
                                                 key=str)),
            iam.PolicyStatement(sid="WriteAndReadQueryResults",
                                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                                resources=[self.results_bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")]),
            iam.PolicyStatement(sid="ListQueryResults", actions=["s3:ListBucket"], resources=[self.results_bucket.bucket_arn],
                                conditions={"StringLike": {"s3:prefix": [RESULTS_PREFIX, f"{RESULTS_PREFIX}/*"]}}),
            # s3:prefix is no condition key of ListBucketMultipartUploads (IAM service authorization reference); the
            # bucket holds query results only. Athena's list of result-location permissions names both.
            iam.PolicyStatement(sid="ListResultUploads", actions=["s3:ListBucketMultipartUploads"],
                                resources=[self.results_bucket.bucket_arn]),
            iam.PolicyStatement(sid="DecryptDataEncryptResults", actions=["kms:Decrypt", "kms:GenerateDataKey"],
                                resources=[data_key.key_arn]),
        ]
        policy = iam.ManagedPolicy(self, f"ReaderPolicy{pascal(dataset)}",
                                   description=f"Query dataset {dataset} through the {self.workgroup.name} Athena workgroup",
                                   statements=statements)
        for bucket, prefix in prefixes:
            acknowledge_wildcard_resource(policy, bucket.arn_for_objects(f"{prefix}/*"),
                                          f"object keys under {prefix}/ are created at run time (hour partitions, batch "
                                          "files); the reader may only read them")
        acknowledge_wildcard_resource(policy, self.results_bucket.arn_for_objects(f"{RESULTS_PREFIX}/*"),
                                      "Athena names each query's result objects by its query id at run time")
        return policy
