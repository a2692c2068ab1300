"""Encryption for everything the Glue jobs write outside the lake buckets' own defaults.

One security configuration per environment: S3 writes with SSE-KMS on the data key, continuous logs
and job bookmarks encrypted with a dedicated key whose policy lets CloudWatch Logs use it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.job_iam import allow_cloudwatch_logs, grant_key
from infra.naming import retained_name

# How long the jobs' logs (driver and executors) are kept.
JOB_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS


@dataclass(frozen=True)
class JobLogging:
    """A job's logging settings (the L2's continuous_logging, extra DefaultArguments) and the groups it writes to."""

    continuous_logging: glue.ContinuousLoggingProps
    arguments: dict[str, str]
    log_groups: tuple[logs.LogGroup, ...]


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
        # "-jobs-": the name the log groups carry since the stack creates them; under the earlier "-glue-" names Glue
        # had created them itself, and a stack-made group of the same name would fail the deploy ("already exists").
        self.configuration_name = f"streamlake-{environment}-jobs-{hashlib.sha256(content.encode()).hexdigest()[:12]}"
        cfn.add_property_override("Name", self.configuration_name)

    def job_logging(self, scope: Construct, job: str, role: iam.IRole, glue_version: str) -> JobLogging:
        """The log groups a job's runs write to, created by the stack under the names Glue gives them with this
        security configuration (it encrypts CloudWatch logs), each kept JOB_LOG_RETENTION and encrypted with the logs
        key; and the job settings that make Glue use them. A group refers to the key, so CloudFormation deletes it
        before the key, and a retained environment retains both.

        - Glue 4.0: continuous logs in `<custom-log-group-name>-<Security-Configuration-Name>` for the custom group
          `--continuous-log-logGroup` names (Glue "Enabling continuous logging for AWS Glue 4.0 and earlier jobs",
          encrypting log data); driver output and errors in `/aws-glue/jobs/<security configuration>-role/<Role
          Name>/output` and `/error` (the Glue 2.0 start-times page and the Glue 5.0 logging page give this form;
          for 4.0 unverified, and the Glue API's JobRun.LogGroupName text gives `/aws-glue/jobs-<role>-<security
          configuration>/` instead: docs/operations.md says how to settle it).
        - Glue 5.x: the continuous-logging arguments are deprecated ("Migrating AWS Glue for Spark jobs to AWS Glue
          version 5.0"); `--custom-logGroup-prefix` puts error and output under
          `<prefix>/<Security-Configuration-Name>-role/<role>/error` and `/output` (Glue "Logging for AWS Glue
          jobs", security configuration: documented for 5.0; 5.1 unverified).

        The names follow the security configuration's name, which follows its content (below): a changed
        configuration gets new groups, and `make diff` shows them replaced."""
        base = retained_name(f"/aws-glue/streamlake/{self.environment}/{job}", self.removal_policy)
        role_part = f"{self.configuration_name}-role/{role.role_name}"
        if float(glue_version) < 5:
            groups = {
                "ContinuousLogs": cdk.Fn.join("-", [base, self.configuration_name]),
                "OutputLogs": f"/aws-glue/jobs/{role_part}/output",
                "ErrorLogs": f"/aws-glue/jobs/{role_part}/error",
            }
            # The argument names the custom group Glue appends the configuration's name to, not the group itself (and
            # the role's GlueContinuousLogs statement covers it: the L2's own grant on a named group would add another).
            logging = glue.ContinuousLoggingProps(enabled=True)
            arguments = {"--continuous-log-logGroup": base}
        else:
            groups = {"OutputLogs": f"{base}/{role_part}/output", "ErrorLogs": f"{base}/{role_part}/error"}
            logging = glue.ContinuousLoggingProps(enabled=False)
            arguments = {"--custom-logGroup-prefix": base}
        created = [logs.LogGroup(scope, key, log_group_name=name, retention=JOB_LOG_RETENTION, encryption_key=self.logs_key,
                                 removal_policy=self.removal_policy) for key, name in groups.items()]
        return JobLogging(continuous_logging=logging, arguments=arguments, log_groups=tuple(created))

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
