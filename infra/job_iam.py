"""Least-privilege statements shared by the Glue job roles.

The CDK grant helpers (bucket.grant_read_write, key.grant_encrypt_decrypt) use wildcard actions
(s3:GetObject*, s3:List*, kms:GenerateDataKey*, ...). The jobs need a handful of exact actions, so
they are written out here once, scoped to one prefix or one key.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from glue_jobs.metrics import METRICS_NAMESPACE
from infra.nag import acknowledge, acknowledge_wildcard_resource
from infra.runtimes import emrfs

# What Hadoop's S3 filesystem does under a prefix: list, read, write (incl. multipart), delete.
OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")
KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")
EMRFS_FOLDER_MARKER = "_$folder$"


def grant_prefix(role: iam.IRole, bucket: s3.IBucket, prefix: str, *, glue_version: str) -> None:
    """List, read, write and delete objects under `prefix/` of `bucket` (and the prefix's own key, and its
    EMRFS folder marker where the job's Glue version reads S3 through EMRFS), nothing else in it."""
    prefix = prefix.strip("/")
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
        )
    )
    # What Glue's own service-role policy grants every job beside ListBucket (AWS managed policy AWSGlueServiceRole:
    # s3:GetBucketLocation, s3:ListBucket on "*"), narrowed: the bucket's region, which S3 clients ask for before they
    # address it, on this bucket only; and its top level listed one level deep (prefix "" with delimiter "/": the
    # dataset folders' names, no object below them), which a file system's existence check of the job's root folder
    # and its parent makes. Which of the two EMRFS or S3A call on Glue is unverified (no S3 connector runs here).
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn]))
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringEquals": {"s3:prefix": "", "s3:delimiter": "/"}},
        )
    )
    objects = bucket.arn_for_objects(f"{prefix}/*")
    # The prefix key itself too: Hadoop's file systems ask for it (exists, getFileStatus, mkdirs of the
    # job's root folder). EMRFS, the S3 connector of Glue 4.0 and 5.0, writes `<folder>_$folder$` marker
    # objects for the folders it creates (under prefix/ those are already covered); S3A (5.1, 6.0) keeps
    # `<folder>/` markers, under prefix/ too (infra/runtimes.py). No S3 connector runs in the tests, so
    # tests/infra/test_glue_jobs.py checks the synthesized statements per version.
    resources = [objects, bucket.arn_for_objects(prefix)]
    if emrfs(glue_version):
        resources.append(bucket.arn_for_objects(f"{prefix}{EMRFS_FOLDER_MARKER}"))
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(OBJECT_ACTIONS), resources=resources))
    acknowledge_wildcard_resource(
        role, objects, f"object keys under {prefix}/ are created at run time (batch and partition names); the job may touch nothing else in the bucket"
    )
    if bucket.encryption_key is not None:
        grant_key(role, bucket.encryption_key)


def add_spark_ui(job, role: iam.IRole, bucket: s3.IBucket | None, name: str, *, glue_version: str) -> None:
    """Spark UI event logs for a job (Glue "Monitoring jobs using the Apache Spark web UI": `--enable-spark-ui` and
    `--spark-event-logs-path`, read by a Spark history server when a batch is slow), under spark-ui/<name>/ of
    `bucket` (the job assets bucket), which the role may write there only. Set on the template rather than through
    the L2's sparkUI prop, whose grant gives the role wildcard actions on the bucket. None: no Spark UI."""
    if bucket is None:
        return
    grant_prefix(role, bucket, f"spark-ui/{name}", glue_version=glue_version)
    override_default_arguments(job, {"--enable-spark-ui": "true",
                                     "--spark-event-logs-path": f"s3://{bucket.bucket_name}/spark-ui/{name}/"})


def override_default_arguments(job, arguments: dict[str, str]) -> None:
    """Set DefaultArguments on a job's template beside the L2's own, and record them on the job, where
    infra.job_keeper.run_fixed_properties reads them: an override the digest missed would not restart a running job."""
    cfn = job.node.default_child
    for key, value in arguments.items():
        cfn.add_property_override(f"DefaultArguments.{key}", value)
    job._default_argument_overrides = {**argument_overrides(job), **arguments}


def argument_overrides(job) -> dict[str, str]:
    """The DefaultArguments override_default_arguments set on `job` (none: {})."""
    return dict(getattr(job, "_default_argument_overrides", {}))


def grant_key(role: iam.IRole, key: kms.IKey) -> None:
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(KEY_ACTIONS), resources=[key.key_arn]))


def acknowledge_glue_job_role(role: iam.IRole, *, uses_connection: bool) -> None:
    """The wildcards every Glue job role carries, each for a reason the action or service imposes."""
    # The ARN as the statement writes it: tokens in an environment-agnostic stack, literals once account and
    # region are set (a fixed finding id here failed every synth of such an environment).
    stack = cdk.Stack.of(role)
    acknowledge_wildcard_resource(role, f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws-glue/*",
                                  "Glue continuous logging creates its log groups and streams under /aws-glue/ with names derived from the job run and security configuration")
    star = "cloudwatch:PutMetricData supports no resource-level permissions; a cloudwatch:namespace condition restricts it"
    if uses_connection:
        star += ("; the EC2 Describe calls a Glue connection needs support none either"
                 "; glue:GetSchemaVersion by SchemaVersionId names no registry, so AWS's deserializer example grants it on *")
    acknowledge(role, "AwsSolutions-IAM5[Resource::*]", star)


def allow_cloudwatch_logs(key: kms.IKey, log_group_name: str) -> None:
    """Let CloudWatch Logs use `key` for one log group, or for the groups under a name ending in `*`, only.

    CloudWatch Logs calls KMS with the encryption context `aws:logs:arn` = the log group's ARN, and the
    key policy names the service principal `logs.<region>.amazonaws.com` with a condition on that context
    (CloudWatch Logs user guide, "Encrypt log data in CloudWatch Logs using AWS Key Management Service").
    In a key policy, Resource "*" means this key.
    """
    stack = cdk.Stack.of(key)
    arn = f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:{log_group_name}"
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],
            conditions={("ArnLike" if log_group_name.endswith("*") else "ArnEquals"): {"kms:EncryptionContext:aws:logs:arn": arn}},
        )
    )


def grant_put_metric_data(role: iam.IRole, sid: str) -> None:
    """PutMetricData into the jobs' namespace (and Glue's, for Glue's own job metrics) only.

    PutMetricData supports no resource-level permissions (Service Authorization Reference, CloudWatch), so
    the resource is "*" and the `cloudwatch:namespace` condition key narrows it.
    """
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=sid,
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": [METRICS_NAMESPACE, "Glue"]}},
        )
    )

