"""The job keeper: keeps each streaming job of an environment running, and rolls deploys onto running jobs.

One Lambda function per environment (infra/job_keeper.py). It is invoked by:
- a schedule every 5 minutes: every job is checked. AWS delivers Glue's state-change events to EventBridge on a
  best-effort basis (EventBridge "Events from AWS services": "delivered on a best effort basis"), so the events
  alone could miss a stop; the schedule backs them up, and its metrics feed the not-running alarm;
- EventBridge's "Glue Job State Change" events of the jobs (FAILED, TIMEOUT, ERROR, STOPPED): that job is checked
  at once;
- CloudFormation, as the custom resource Custom::StreamingJobDeploy of each job: on Create it starts the job
  (nothing else starts it after the first deploy); on an Update whose CodeDigest (the job's script, package,
  jars and arguments) changed, it stops the active run, waits for it to end and starts the job again, so the new
  code runs from the same checkpoint; an unchanged digest, and Delete, do nothing to the job.

What a check decides (`decide`, a plain function of the job's runs; stateless, every fact comes from Glue):
1. an active run (STARTING, RUNNING, STOPPING, WAITING): nothing to do;
2. held: the job carries the tag HOLD_TAG, set by `streamlake job stop` (operations/jobs.py) and removed by `job start`:
   an operator's deliberate stop is left alone;
3. in the maintenance window (Glue restarts streaming jobs within 3 hours of the window's start: Glue "Job"
   API, MaintenanceWindow), within MAINTENANCE_GRACE of the last run's end: Glue's own restart is awaited;
4. capped: `max_starts_per_hour` runs started in the last hour: no more starts; the RestartsCapped metric is 1
   and its alarm tells the operator (a job that fails at once would otherwise restart forever);
5. backing off: the last run ended less than backoff_seconds x 2^(runs started in the last hour - 1) ago;
6. otherwise the job is started.

Metrics (namespace from METRICS_NAMESPACE, dimension JobName), every check: JobNotRunning (1 without an active
run, held or not), RestartsCapped (1 when capped) and DownSeconds (since the last run ended: an outage longer than
the source's retention loses records, so its alarm fires at half of it). The not-running alarm treats missing data as breaching, so
a keeper that stopped reporting alarms too.

Configuration (environment): JOBS, a JSON object {job name: {"maintenance_window": "SUN:03" or null}};
MAX_STARTS_PER_HOUR; BACKOFF_SECONDS; METRICS_NAMESPACE; JOB_ARN_PREFIX (arn:<partition>:glue:<region>:<account>:job/).
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.request
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

log = logging.getLogger()
log.setLevel(logging.INFO)

ACTIVE_STATES = frozenset({"STARTING", "RUNNING", "STOPPING", "WAITING"})
HOLD_TAG = "streamlake:hold"
MAINTENANCE_HOURS = 3  # Glue restarts within 3 hours of the window's start (Glue API, Job.MaintenanceWindow)
MAINTENANCE_GRACE = timedelta(minutes=15)
_DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
STOP_WAIT_SECONDS = 600  # how long a deploy waits for a stopped run to end before leaving the start to the schedule


@dataclass(frozen=True)
class Policy:
    max_starts_per_hour: int = 4
    backoff_seconds: int = 60
    maintenance_window: str | None = None  # "SUN:03": day and hour, UTC (the config's maintenance_window)


@dataclass(frozen=True)
class Decision:
    start: bool
    state: str  # running | held | maintenance | capped | backoff | down
    reason: str
    down_seconds: float = 0.0  # since the last run ended (0 with an active run or before any run)

    @property
    def running(self) -> bool:
        return self.state == "running"


def in_maintenance_window(now: datetime, window: str | None) -> bool:
    """Whether `now` lies within MAINTENANCE_HOURS of the weekly window's start ("SUN:03", UTC)."""
    if not window:
        return False
    day, hour = window.upper().split(":")
    start_of_week = (now - timedelta(days=now.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    start = start_of_week + timedelta(days=_DAYS.index(day), hours=int(hour))
    week = timedelta(days=7)
    return any(s <= now < s + timedelta(hours=MAINTENANCE_HOURS) for s in (start - week, start, start + week))


def _ended(run: dict) -> datetime:
    return run.get("CompletedOn") or run.get("LastModifiedOn") or run["StartedOn"]


def decide(runs: list[dict], *, held: str | None, now: datetime, policy: Policy) -> Decision:
    """What to do about one job, from its recent runs (GetJobRuns' JobRuns) and its hold tag (see the module doc)."""
    active = [r for r in runs if r["JobRunState"] in ACTIVE_STATES]
    if active:
        return Decision(False, "running", f"run {active[0]['Id']} is {active[0]['JobRunState']}")
    newest = max(runs, key=lambda r: r["StartedOn"]) if runs else None
    since_end = now - _ended(newest) if newest else None
    decision = _decide_down(runs, newest, since_end, held=held, now=now, policy=policy)
    return replace(decision, down_seconds=since_end.total_seconds() if since_end is not None else 0.0)


def _decide_down(runs: list[dict], newest: dict | None, since_end: timedelta | None, *, held: str | None,
                 now: datetime, policy: Policy) -> Decision:
    """decide() for a job without an active run, steps 2 to 6 of the module doc."""
    if held is not None:
        return Decision(False, "held", f"held by an operator ({HOLD_TAG}={held}): `job start` releases it")
    if in_maintenance_window(now, policy.maintenance_window) and since_end is not None and since_end < MAINTENANCE_GRACE:
        return Decision(False, "maintenance", f"in the maintenance window {policy.maintenance_window}: Glue restarts the job")
    started_last_hour = [r for r in runs if r["StartedOn"] > now - timedelta(hours=1)]
    if len(started_last_hour) >= policy.max_starts_per_hour:
        return Decision(False, "capped", f"{len(started_last_hour)} runs started in the last hour (cap "
                                         f"{policy.max_starts_per_hour}): not restarted again; fix the cause, then `job start`")
    if newest is not None:
        wait = timedelta(seconds=policy.backoff_seconds * 2 ** max(0, len(started_last_hour) - 1))
        if since_end < wait:
            return Decision(False, "backoff", f"the last run ended {int(since_end.total_seconds())} s ago; next start "
                                              f"after {int(wait.total_seconds())} s")
    why = "never started" if newest is None else f"last run {newest['Id']} {newest['JobRunState']}" + (
        f": {newest['ErrorMessage']}" if newest.get("ErrorMessage") else "")
    return Decision(True, "down", why)


class Keeper:
    """The checks and deploys against Glue and CloudWatch clients (boto3), for the jobs of one environment."""

    def __init__(self, glue, cloudwatch, *, jobs: dict[str, dict], namespace: str, max_starts_per_hour: int,
                 backoff_seconds: int, job_arn_prefix: str, clock=lambda: datetime.now(timezone.utc),
                 sleep=time.sleep) -> None:
        self.glue, self.cloudwatch, self.jobs, self.namespace = glue, cloudwatch, jobs, namespace
        self.max_starts_per_hour, self.backoff_seconds = max_starts_per_hour, backoff_seconds
        self.arn = job_arn_prefix + "{}"  # arn:<partition>:glue:<region>:<account>:job/
        self.clock, self.sleep = clock, sleep

    def policy(self, job_name: str) -> Policy:
        return Policy(self.max_starts_per_hour, self.backoff_seconds, (self.jobs.get(job_name) or {}).get("maintenance_window"))

    def runs(self, job_name: str) -> list[dict]:
        return self.glue.get_job_runs(JobName=job_name, MaxResults=50).get("JobRuns", [])

    def held(self, job_name: str) -> str | None:
        return self.glue.get_tags(ResourceArn=self.arn.format(job_name)).get("Tags", {}).get(HOLD_TAG)

    def check(self, job_name: str) -> Decision:
        """Decide for one job, start it if that is the decision, publish its metrics."""
        decision = decide(self.runs(job_name), held=self.held(job_name), now=self.clock(), policy=self.policy(job_name))
        if decision.start:
            decision = self._start(job_name, decision)
        log.info("job %s: %s (%s)", job_name, decision.state, decision.reason)
        self._publish(job_name, decision)
        return decision

    def _start(self, job_name: str, decision: Decision) -> Decision:
        try:
            run_id = self.glue.start_job_run(JobName=job_name)["JobRunId"]
        except self.glue.exceptions.ConcurrentRunsExceededException:
            return Decision(False, "running", "a run started meanwhile (Glue refused a second one)", decision.down_seconds)
        return Decision(False, "running", f"started run {run_id}; {decision.reason}", decision.down_seconds)

    def _publish(self, job_name: str, decision: Decision) -> None:
        dimensions = [{"Name": "JobName", "Value": job_name}]
        self.cloudwatch.put_metric_data(Namespace=self.namespace, MetricData=[
            {"MetricName": "JobNotRunning", "Dimensions": dimensions, "Value": 0.0 if decision.running else 1.0, "Unit": "Count"},
            {"MetricName": "RestartsCapped", "Dimensions": dimensions, "Value": 1.0 if decision.state == "capped" else 0.0,
             "Unit": "Count"},
            # How long the job has had no run: past half the source's retention, records start to expire unread
            # (its alarm, OutagePastHalfRetention, is built from the JOBS entry's retention_hours).
            {"MetricName": "DownSeconds", "Dimensions": dimensions, "Value": float(decision.down_seconds), "Unit": "Seconds"},
        ])

    def check_all(self) -> dict[str, str]:
        """Every job, each on its own: a Glue or CloudWatch error for one job (throttling, a job deleted by hand) is
        logged and reported as "error", and the other jobs are still checked. The failed job publishes nothing this
        time, so its not-running alarm (missing data breaches) fires if the error persists."""
        states = {}
        for name in sorted(self.jobs):
            try:
                states[name] = self.check(name).state
            except Exception:  # noqa: BLE001 - see the docstring
                log.exception("job %s: the check failed", name)
                states[name] = "error"
        return states

    def deploy(self, request_type: str, properties: dict, old_properties: dict | None) -> str:
        """The custom resource's work (see the module doc); returns what was done."""
        job_name = properties["JobName"]
        if request_type == "Create":
            return self.check(job_name).reason
        if request_type != "Update" or (old_properties or {}).get("CodeDigest") == properties.get("CodeDigest"):
            return "nothing to do"
        active = [r for r in self.runs(job_name) if r["JobRunState"] in ACTIVE_STATES]
        if not active:
            return "code changed; the job was not running: " + self.check(job_name).reason
        self.glue.batch_stop_job_run(JobName=job_name, JobRunIds=[r["Id"] for r in active])
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while any(r["JobRunState"] in ACTIVE_STATES for r in self.runs(job_name)):
            if time.monotonic() > deadline:
                return f"code changed; stopped run {active[0]['Id']}, still stopping after {STOP_WAIT_SECONDS} s: the schedule starts it"
            self.sleep(10)
        try:
            run_id = self.glue.start_job_run(JobName=job_name)["JobRunId"]
        except self.glue.exceptions.ConcurrentRunsExceededException:
            return f"code changed; stopped run {active[0]['Id']}; a run started meanwhile"
        return f"code changed; stopped run {active[0]['Id']}, started run {run_id} on the new code"


def _respond(event: dict, status: str, reason: str) -> None:
    """CloudFormation's custom resource response (PUT to the pre-signed ResponseURL; CloudFormation
    "Custom resources", response objects)."""
    body = json.dumps({
        "Status": status, "Reason": reason[:1000], "PhysicalResourceId": event.get("PhysicalResourceId")
        or f"deploy-{event['ResourceProperties']['JobName']}", "StackId": event["StackId"], "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30):  # noqa: S310 (CloudFormation's https URL)
        pass


def keeper_from_environment() -> Keeper:
    import boto3

    return Keeper(boto3.client("glue"), boto3.client("cloudwatch"), jobs=json.loads(os.environ["JOBS"]),
                  namespace=os.environ["METRICS_NAMESPACE"], max_starts_per_hour=int(os.environ["MAX_STARTS_PER_HOUR"]),
                  backoff_seconds=int(os.environ["BACKOFF_SECONDS"]), job_arn_prefix=os.environ["JOB_ARN_PREFIX"])


def handle(event: dict, keeper: Keeper) -> dict:
    """Route one invocation (see the module doc): CloudFormation, a Glue state-change event, or the schedule."""
    if "RequestType" in event:
        try:
            reason = keeper.deploy(event["RequestType"], event["ResourceProperties"], event.get("OldResourceProperties"))
            status = "SUCCESS"
        except Exception as error:  # a deploy never fails on the job's state: the schedule retries, the alarms tell
            log.exception("deploy step failed")
            reason, status = f"the job was not (re)started: {error}", "SUCCESS"
        _respond(event, status, reason)
        return {"deploy": reason}
    job_name = (event.get("detail") or {}).get("jobName")
    if event.get("detail-type") == "Glue Job State Change" and job_name in keeper.jobs:
        return {job_name: keeper.check(job_name).state}
    return keeper.check_all()


def handler(event, context):  # the Lambda entry point
    return handle(event, keeper_from_environment())
