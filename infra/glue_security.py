"""Encryption for everything the Glue jobs write outside the lake buckets' own defaults.

One security configuration per environment: S3 writes with SSE-KMS on the data key, continuous logs
and job bookmarks encrypted with a dedicated key whose policy lets CloudWatch Logs use it.
"""

from __future__ import annotations

import hashlib
import json

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.job_iam import allow_cloudwatch_logs, grant_key
from infra.naming import retained_name

# How long the jobs' continuous logs (driver and executors) are kept.
JOB_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS


class GlueJobSecurity(Construct):
    def __init__(self, scope: Construct, id_: str, *, environment: str, data_key: kms.IKey,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, id_)
        self.data_key, self.environment, self.removal_policy = data_key, environment, removal_policy
        self.logs_key = kms.Key(
            self,
            "LogsKey",
            enable_key_rotation=True,
            removal_policy=removal_policy,
            description="Glue job continuous logs and bookmarks",
        )
        # CloudWatch Logs encrypts the Glue log groups with this key (Glue security configuration docs).
        allow_cloudwatch_logs(self.logs_key, "/aws-glue/*")
        self.configuration = glue.SecurityConfiguration(
            self,
            "Configuration",
            s3_encryption=glue.S3Encryption.kms(data_key),
            cloud_watch_encryption=glue.CloudWatchEncryption.kms(self.logs_key),
            job_bookmarks_encryption=glue.JobBookmarksEncryption.client_side_kms(self.logs_key),
        )
        # The construct retains by default; a security configuration holds no data, and a retained one keeps
        # its fixed name and so blocks creating the environment again (infra/naming.py).
        self.configuration.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        # Every property of AWS::Glue::SecurityConfiguration is create-only (its resource schema has no update
        # handler), so any change replaces it, and CloudFormation creates the replacement before it deletes the old
        # one: under the same name that fails. The name follows the content instead, so a changed configuration
        # gets a new name and the replacement deploys (jobs refer to it by Ref and follow).
        cfn = self.configuration.node.default_child
        content = json.dumps(cdk.Stack.of(self).resolve(cfn.encryption_configuration), sort_keys=True, separators=(",", ":"))
        cfn.add_property_override("Name", f"streamlake-{environment}-glue-{hashlib.sha256(content.encode()).hexdigest()[:12]}")

    def job_log_group(self, scope: Construct, job: str) -> logs.LogGroup:
        """A job's continuous log group (`--continuous-log-logGroup`, Glue "Enabling continuous logging for AWS Glue
        jobs": a custom log group instead of /aws-glue/jobs/logs-v2), owned by the stack: kept JOB_LOG_RETENTION,
        encrypted with the logs key. The group refers to the key, so CloudFormation deletes it before the key, and a
        retained environment retains both. Glue's own output and error groups (driver stdout and stderr) are
        created by Glue outside the stack (docs/infrastructure.md says what only AWS can show)."""
        return logs.LogGroup(
            scope, "ContinuousLogs", log_group_name=retained_name(f"/aws-glue/streamlake/{self.environment}/{job}", self.removal_policy),
            retention=JOB_LOG_RETENTION, encryption_key=self.logs_key, removal_policy=self.removal_policy,
        )

    def grant_job(self, role: iam.IRole) -> None:
        """What a job role needs to write encrypted S3 objects, logs and bookmarks."""
        grant_key(role, self.data_key)
        grant_key(role, self.logs_key)
        stack = cdk.Stack.of(self)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="GlueContinuousLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:AssociateKmsKey"],
                resources=[f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws-glue/*"],
            )
        )
