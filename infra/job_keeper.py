"""The job keeper of one environment: a Lambda function that keeps every streaming job running and rolls a deploy
that changed a job's code onto its running job (infra/functions/job_keeper/handler.py says what it decides).

- Invoked every 5 minutes by an EventBridge schedule, at once by the jobs' "Glue Job State Change" events
  (FAILED, TIMEOUT, ERROR, STOPPED), and by CloudFormation through one custom resource per streaming job
  (Custom::StreamingJobDeploy) whose CodeDigest is the digest of what Glue runs: the job's Command (script) and
  DefaultArguments (package zip, jars, every argument), as synthesized. A deploy that changes any of them
  changes the digest, so CloudFormation sends an Update and the function restarts a running job on the new code;
  an unchanged job keeps its digest and its run.
- Its role: GetJobRuns, StartJobRun, BatchStopJobRun and GetTags on the environment's streaming jobs only (Glue
  job ARNs: Service Authorization Reference, AWS Glue, resource type "job"); PutMetricData narrowed to the
  project's namespace by `cloudwatch:namespace`; its own log group, kept for LOG_RETENTION.
- Its metrics (JobNotRunning, RestartsCapped per JobName) feed the alarms infra/monitoring.py builds.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from glue_jobs.metrics import METRICS_NAMESPACE
from infra.constants import pascal
from infra.job_iam import argument_overrides
from infra.nag import acknowledge_wildcard_resource

CODE = Path(__file__).resolve().parent / "functions" / "job_keeper"
MAX_STARTS_PER_HOUR = 4
BACKOFF_SECONDS = 60
CHECK_EVERY = cdk.Duration.minutes(5)
LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
# A deploy waits for a stopped run to end (handler.STOP_WAIT_SECONDS, 600) before it starts the job again.
TIMEOUT = cdk.Duration.minutes(12)
DEPLOY_RESOURCE_TYPE = "Custom::StreamingJobDeploy"
ENDED_STATES = ["FAILED", "TIMEOUT", "ERROR", "STOPPED"]


def code_digest(job) -> str:
    """The digest of what Glue runs for a job (a glue L2 job): its Command and DefaultArguments as synthesized,
    the arguments set as template overrides (job_iam.override_default_arguments, e.g. the Spark UI's) included.
    Called after the job is complete (the stack builds the keeper last)."""
    cfn = job.node.default_child
    stack = cdk.Stack.of(job)
    arguments = {**stack.resolve(cfn.default_arguments), **stack.resolve(argument_overrides(job))}
    # The template's spelling of the Command (jsii resolves the struct with camelCase keys: scriptLocation), so the
    # digest is of exactly what the template gives Glue (tests/infra/test_job_keeper.py recomputes it from there).
    command = {key[:1].upper() + key[1:]: value for key, value in stack.resolve(cfn.command).items()}
    what = {"Command": command, "DefaultArguments": arguments}
    return hashlib.sha256(json.dumps(what, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class JobKeeper(Construct):
    def __init__(self, scope: Construct, id_: str, *, jobs: dict[str, object], maintenance_window: str | None,
                 retention_hours: dict[str, int], removal_policy: cdk.RemovalPolicy) -> None:
        """`jobs`: source name -> its glue L2 streaming job; `retention_hours`: source name -> its stream's or topic's
        retention (the job's DownSeconds alarm fires at half of it)."""
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        job_arn_prefix = f"arn:{stack.partition}:glue:{stack.region}:{stack.account}:job/"
        names = {source: job.job_name for source, job in jobs.items()}
        self.log_group = logs.LogGroup(self, "Logs", retention=LOG_RETENTION, removal_policy=removal_policy)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="The job keeper: starts, restarts and redeploys the streaming jobs")
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="WriteOwnLogs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[self.log_group.log_group_arn, f"{self.log_group.log_group_arn}:log-stream:*"]))
        acknowledge_wildcard_resource(self.role, f"{self.log_group.log_group_arn}:log-stream:*",
                                      "Lambda names its log streams per execution environment; the log group is the function's own")
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="KeepStreamingJobsRunning",
            actions=["glue:GetJobRuns", "glue:StartJobRun", "glue:BatchStopJobRun", "glue:GetTags"],
            resources=[job_arn_prefix + name for name in names.values()]))
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="PublishKeeperMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}}))
        acknowledge_wildcard_resource(self.role, "*", "PutMetricData has no resource-level permissions; the "
                                      "cloudwatch:namespace condition limits it to the project's namespace")
        self.function = lambda_.Function(
            self, "Function", runtime=lambda_.Runtime.PYTHON_3_14, handler="handler.handler",
            code=lambda_.Code.from_asset(str(CODE), exclude=["__pycache__", "*.pyc"]),
            role=self.role, timeout=TIMEOUT, memory_size=256, log_group=self.log_group,
            description="streamlake job keeper (infra/functions/job_keeper/handler.py)",
            # One invocation at a time: a schedule tick and a state-change event never start the same job twice
            # (Glue would refuse the second run anyway: MaxConcurrentRuns 1).
            reserved_concurrent_executions=1,
            environment={
                "JOBS": json.dumps({name: {"maintenance_window": maintenance_window, "retention_hours": retention_hours[source]}
                                    for source, name in names.items()}, sort_keys=True),
                "MAX_STARTS_PER_HOUR": str(MAX_STARTS_PER_HOUR), "BACKOFF_SECONDS": str(BACKOFF_SECONDS),
                "METRICS_NAMESPACE": METRICS_NAMESPACE, "JOB_ARN_PREFIX": job_arn_prefix,
            },
        )
        self.schedule = events.Rule(self, "Schedule", schedule=events.Schedule.rate(CHECK_EVERY),
                                    description="Check every streaming job (Glue's events are delivered best effort)")
        self.schedule.add_target(targets.LambdaFunction(self.function, retry_attempts=0))
        self.state_changes = events.Rule(
            self, "JobEnded", description="A streaming job run ended: check that job at once",
            event_pattern=events.EventPattern(source=["aws.glue"], detail_type=["Glue Job State Change"],
                                              detail={"state": ENDED_STATES, "jobName": sorted(names.values())}))
        self.state_changes.add_target(targets.LambdaFunction(self.function, retry_attempts=2))
        self.deploys: dict[str, cdk.CustomResource] = {}
        for source, job in jobs.items():
            self.deploys[source] = cdk.CustomResource(
                self, f"Deploy{pascal(source)}",
                service_token=self.function.function_arn, resource_type=DEPLOY_RESOURCE_TYPE,
                properties={"JobName": job.job_name, "CodeDigest": code_digest(job)})
