"""The job keeper of one environment: a Lambda function that keeps every streaming job running and rolls a deploy
that changed what a job run starts with onto its running job (infra/functions/job_keeper/handler.py says what it
decides).

- Invoked every 5 minutes by an EventBridge schedule, at once by the jobs' "Glue Job State Change" events
  (FAILED, TIMEOUT, ERROR, STOPPED), and by CloudFormation through one custom resource per streaming job
  (Custom::StreamingJobDeploy). Its CodeDigest is the digest of everything a job run fixes when it starts
  (run_fixed_properties: every job property but NOT_RUN_FIXED, so the script, the arguments, Glue version, worker type
  and count, timeout, maintenance window, connections, security configuration, role); its RunsWith carries the role, security configuration and connections
  as references, which CloudFormation resolves, so a replaced role or a renamed configuration changes the resource
  too. A deploy that changes any of them makes CloudFormation send an Update, and the function restarts the running
  job on the new settings; an unchanged job keeps its settings and its run. `make diff` names the restart.
- No reserved concurrency: it fails the deploy in an account whose unreserved concurrency would drop below its minimum
  (Lambda "Configuring reserved concurrency"), and the handler keeps concurrent invocations apart itself.
- The deploy resources wait for the jobs' roles and policies, log groups and (stack.py) the Lake Formation grants;
  the schedule waits for the deploy resources, so no check starts a job before what it needs exists.
- Its role: GetJobRuns, StartJobRun, BatchStopJobRun, GetTags and Tag/UntagResource of its deploy mark on the
  environment's streaming jobs only (Glue job ARNs: Service Authorization Reference, AWS Glue, resource type "job");
  PutMetricData narrowed to the project's namespace by `cloudwatch:namespace`; its own log group, kept for
  LOG_RETENTION.
- Its metrics (JobNotRunning, RestartsCapped, DownSeconds per JobName) and its own errors feed the alarms
  infra/monitoring.py builds.
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
from infra.functions.job_keeper.handler import CHECKPOINT_BUCKET_TAG, DEPLOY_TAG
from infra.job_iam import argument_overrides
from infra.nag import acknowledge_wildcard_resource

# The keeper role's statements that let it stop a job's runs: the checkpoint bucket's tag, then the environment's tags
# (devtools/diff.py reads them from a new template to tell whether a moved source's old job can be stopped).
STOP_BY_CHECKPOINT_TAG, STOP_BY_ENVIRONMENT_TAGS = "StopCheckpointHolders", "StopCheckpointHoldersOfEnvironment"
STOP_STATEMENTS = (STOP_BY_CHECKPOINT_TAG, STOP_BY_ENVIRONMENT_TAGS)
CODE = Path(__file__).resolve().parent / "functions" / "job_keeper"
MAX_FAILURES_PER_HOUR = 4
BACKOFF_SECONDS = 60
CHECK_EVERY = cdk.Duration.minutes(5)
LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
# A deploy waits for a stopped run to end (handler.STOP_WAIT_SECONDS, 600) before it starts the job again.
TIMEOUT = cdk.Duration.minutes(12)
DEPLOY_RESOURCE_TYPE = "Custom::StreamingJobDeploy"
# What the digest covers, as a number: raising it when the formula changes makes the next deploy restart every streaming
# job once, and `make diff` say so (1: Command and DefaultArguments, until 2026-11; 2: run_fixed_properties).
DIGEST_FORMULA = "2"
# CloudFormation waits this long for the function's answer to a deploy (ServiceTimeout, 1-3,600 s, default 3,600:
# CloudFormation "Custom resources"): the function's own timeout and a minute. An invocation Lambda dropped then fails
# the deploy after 13 minutes, not an hour.
SERVICE_TIMEOUT = TIMEOUT.plus(cdk.Duration.minutes(1))
# The AWS::Glue::Job properties a job run does not take from the job when it starts, so a change to them needs no
# restart: the description and tags, the concurrency and queuing (they govern starts, not a running run) and
# MaxRetries (Glue's retries of a failed batch job run). Everything else is in the digest: the Glue API's JobRun
# records Arguments, Timeout, WorkerType, NumberOfWorkers, MaxCapacity, SecurityConfiguration, NotificationProperty,
# GlueVersion, ExecutionClass and MaintenanceWindow per run, and the run starts with the job's Command,
# Connections and Role.
NOT_RUN_FIXED = frozenset({"Description", "Tags", "Name", "ExecutionProperty", "JobRunQueuingEnabled", "MaxRetries"})
# The job's references whose value CloudFormation decides at deploy time (a replaced role has a new ARN, a changed
# security configuration a new name, with the same template text): the deploy resource carries them unhashed.
RUNS_WITH = ("Role", "SecurityConfiguration", "Connections")
_CFN_ATTRIBUTES = {  # template property -> the CfnJob attribute that holds it
    "AllocatedCapacity": "allocated_capacity", "Command": "command", "Connections": "connections",
    "DefaultArguments": "default_arguments", "ExecutionClass": "execution_class", "GlueVersion": "glue_version",
    "JobMode": "job_mode", "LogUri": "log_uri", "MaintenanceWindow": "maintenance_window", "MaxCapacity": "max_capacity",
    "NonOverridableArguments": "non_overridable_arguments", "NotificationProperty": "notification_property",
    "NumberOfWorkers": "number_of_workers", "Role": "role", "SecurityConfiguration": "security_configuration",
    "Timeout": "timeout", "WorkerType": "worker_type",
}
ENDED_STATES = ["FAILED", "TIMEOUT", "ERROR", "STOPPED"]


def _template_spelling(value):
    """jsii resolves structs with camelCase keys (scriptLocation); the template spells them ScriptLocation."""
    if isinstance(value, dict) and not any(k.startswith(("Fn::", "Ref")) for k in value):
        return {k[:1].upper() + k[1:]: _template_spelling(v) for k, v in value.items()}
    return value


def run_fixed_properties(job) -> dict:
    """What the template gives Glue for a job (a glue L2 job) that its runs fix at start, as synthesized: every
    property but NOT_RUN_FIXED, the DefaultArguments set as template overrides (job_iam.override_default_arguments,
    e.g. the Spark UI's) included. tests/infra/test_job_keeper.py recomputes it from the template."""
    cfn = job.node.default_child
    stack = cdk.Stack.of(job)
    properties = {}
    for name, attribute in _CFN_ATTRIBUTES.items():
        value = stack.resolve(getattr(cfn, attribute))
        if value is not None:
            properties[name] = value if name in ("DefaultArguments", "NonOverridableArguments") else _template_spelling(value)
    properties["DefaultArguments"] = {**properties.get("DefaultArguments", {}), **stack.resolve(argument_overrides(job))}
    return properties


def deploy_properties(job) -> dict:
    """The deploy resource's properties for a job: the digest of run_fixed_properties(job) and, unhashed, its RUNS_WITH
    references. Called after the job is complete (the stack builds the keeper last)."""
    properties = run_fixed_properties(job)
    digest = hashlib.sha256(json.dumps(properties, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return {"JobName": job.job_name, "DigestFormula": DIGEST_FORMULA, "CodeDigest": digest,
            "RunsWith": {name: properties[name] for name in RUNS_WITH if name in properties}}


class JobKeeper(Construct):
    def __init__(self, scope: Construct, id_: str, *, jobs: dict[str, object], maintenance_windows: dict[str, str | None],
                 retention_hours: dict[str, int], removal_policy: cdk.RemovalPolicy, checkpoint_bucket: str,
                 environment_tags: dict[str, str]) -> None:
        """`jobs`: the job's name in the config (a job of one source: the source's) -> its glue L2 streaming job;
        `maintenance_windows`: name -> the job's maintenance window; `retention_hours`: name -> the shortest retention
        of the job's sources' streams or topics (the job's DownSeconds alarm fires at half of it); `checkpoint_bucket`:
        the environment's checkpoint bucket name, which its streaming jobs carry as the tag CHECKPOINT_BUCKET_TAG;
        `environment_tags`: the config's `tags`, which every job of the stack carries (those deployed before the
        checkpoint-bucket tag existed too)."""
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        job_arn_prefix = f"arn:{stack.partition}:glue:{stack.region}:{stack.account}:job/"
        names = {key: job.job_name for key, job in jobs.items()}
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
            actions=["glue:GetJob", "glue:GetJobRuns", "glue:StartJobRun", "glue:BatchStopJobRun", "glue:GetTags"],
            resources=[job_arn_prefix + name for name in names.values()]))
        # Before a start, the runs of any other job that writes one of the job's checkpoints are stopped (handler
        # release_checkpoints: a source moved between jobs is still run by its old job until CloudFormation deletes
        # it). Which job that is, only Glue knows at deploy time: GetJobs lists every job (no resource type: Service
        # Authorization Reference, AWS Glue, as parliament 1.6.4 bundles it), and the stop is allowed on jobs tagged
        # with this environment's checkpoint bucket only (the job resource type takes aws:ResourceTag, same source).
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="FindCheckpointHolders", actions=["glue:GetJobs"], resources=["*"]))
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid=STOP_BY_CHECKPOINT_TAG, actions=["glue:GetJobRuns", "glue:BatchStopJobRun"],
            resources=[job_arn_prefix + "*"],
            conditions={"StringEquals": {f"aws:ResourceTag/{CHECKPOINT_BUCKET_TAG}": checkpoint_bucket}}))
        if environment_tags:
            # A job deployed before jobs carried the checkpoint-bucket tag has the environment's tags only (the stack
            # tags every resource: infra/stack.py): a source moved off it is stoppable by them, all of them at once
            # (several keys in one StringEquals must all match: IAM User Guide, "Conditions with multiple context
            # keys or values"). The handler stops only jobs whose arguments name one of the starting
            # job's checkpoints, which are this environment's bucket's.
            self.role.add_to_principal_policy(iam.PolicyStatement(
                sid=STOP_BY_ENVIRONMENT_TAGS, actions=["glue:GetJobRuns", "glue:BatchStopJobRun"],
                resources=[job_arn_prefix + "*"],
                conditions={"StringEquals": {f"aws:ResourceTag/{key}": value for key, value in sorted(environment_tags.items())}}))
        acknowledge_wildcard_resource(self.role, job_arn_prefix + "*", "the job that held a moved source's checkpoint is "
                                      "known only at deploy time; the stop is limited to jobs tagged with this "
                                      "environment's checkpoint bucket, or with all of the environment's tags")
        # The deploy mark (handler.DEPLOY_TAG) and nothing else: Glue jobs take tags (Glue "AWS tags in AWS Glue"), and
        # aws:TagKeys limits which (TagResource and UntagResource: Service Authorization Reference, as parliament 1.6.4
        # bundles it).
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="MarkDeploys", actions=["glue:TagResource", "glue:UntagResource"],
            resources=[job_arn_prefix + name for name in names.values()],
            conditions={"ForAllValues:StringEquals": {"aws:TagKeys": [DEPLOY_TAG]}}))
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="PublishKeeperMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}}))
        acknowledge_wildcard_resource(self.role, "*", "PutMetricData has no resource-level permissions (the "
                                      "cloudwatch:namespace condition limits it to the project's namespace), nor has "
                                      "GetJobs, which lists the jobs that may hold a job's checkpoint before it starts")
        self.function = lambda_.Function(
            self, "Function", runtime=lambda_.Runtime.PYTHON_3_14, handler="handler.handler",
            code=lambda_.Code.from_asset(str(CODE), exclude=["__pycache__", "*.pyc"]),
            role=self.role, timeout=TIMEOUT, memory_size=256, log_group=self.log_group,
            description="streamlake job keeper (infra/functions/job_keeper/handler.py)",
            environment={
                "JOBS": json.dumps({name: {"maintenance_window": maintenance_windows[key], "retention_hours": retention_hours[key]}
                                    for key, name in names.items()}, sort_keys=True),
                "MAX_FAILURES_PER_HOUR": str(MAX_FAILURES_PER_HOUR), "BACKOFF_SECONDS": str(BACKOFF_SECONDS),
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
        for key, job in jobs.items():
            self.deploys[key] = cdk.CustomResource(
                self, f"Deploy{pascal(key)}",
                service_token=self.function.function_arn, resource_type=DEPLOY_RESOURCE_TYPE,
                service_timeout=SERVICE_TIMEOUT,
                properties=deploy_properties(job))
        # The schedule starts jobs too: only after every first start the deploys made (and so after all they wait for).
        for deploy in self.deploys.values():
            self.schedule.node.add_dependency(deploy)
