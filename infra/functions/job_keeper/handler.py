"""The job keeper: keeps each streaming job of an environment running, and rolls deploys onto running jobs.

One Lambda function per environment (infra/job_keeper.py). It is invoked by:
- a schedule every 5 minutes: every job is checked. AWS delivers Glue's state-change events to EventBridge on a
  best-effort basis (EventBridge "Events from AWS services": "delivered on a best effort basis"), so the events
  alone could miss a stop; the schedule backs them up, and its metrics feed the not-running alarm;
- EventBridge's "Glue Job State Change" events of the jobs (FAILED, TIMEOUT, ERROR, STOPPED): that job is checked
  at once;
- CloudFormation, as the custom resource Custom::StreamingJobDeploy of each job: on Create it starts the job
  (nothing else starts it after the first deploy); on an Update whose settings changed (CodeDigest, the digest of
  everything a job run fixes when it starts, and RunsWith, the role, security configuration and connections as
  CloudFormation resolves them) it stops the active run, waits for that run to end and starts the job again, so the
  new settings run from the same checkpoint; unchanged settings, and Delete, do nothing to the job.
- Before any start: another job whose runs write one of the job's checkpoints (a source moved from one job to
  another: CloudFormation creates and starts the new job before it deletes the old one) has its active runs stopped,
  and the start waits for them to end (`release_checkpoints`): never two runs on one checkpoint.

CloudFormation invokes the function asynchronously, and Lambda may deliver one event twice; the function has no
reserved concurrency (it would fail the deploy in an account short of unreserved concurrency), so a schedule tick,
a state-change event and a deploy can run at the same time. What keeps them apart lives on the job, in Glue:
- a deploy marks the job with DEPLOY_TAG ("<settings digest> stopping <epoch>") before it stops the run, and a check
  that sees a fresh mark leaves the job to the deploy (state "deploying": no start, no backoff);
- after its start the mark names the run ("<digest> <run id> <epoch>"): a repeated Update of the same settings finds
  that run active and leaves it alone;
- a deploy waits only for the runs it stopped, and a start Glue refuses (MaxConcurrentRuns 1) means another
  invocation started the job on the same definition: one start either way;
- only failed runs (FAILED, TIMEOUT, ERROR) count towards the backoff and the cap, so a deploy's stop and restart is
  neither.

What a check decides (`decide`, a plain function of the job's runs; stateless, every fact comes from Glue):
1. an active run (STARTING, RUNNING, STOPPING, WAITING): nothing to do;
2. held: the job carries the tag HOLD_TAG, set by `streamlake job stop` (operations/jobs.py) and removed by `job start`:
   an operator's deliberate stop is left alone;
3. deploying: a fresh DEPLOY_TAG mark without a run: the deploy starts the job;
4. in the maintenance window (Glue restarts streaming jobs within 3 hours of the window's start: Glue "Job"
   API, MaintenanceWindow), within MAINTENANCE_GRACE of the last run's end: Glue's own restart is awaited;
5. capped: `max_failures_per_hour` runs that started in the last hour failed: no more starts; the RestartsCapped
   metric is 1 and its alarm tells the operator (a job that fails at once would otherwise restart forever);
6. backing off: the last run failed less than backoff_seconds x 2^(failed runs of the last hour - 1) ago;
7. otherwise the job is started (at once after a run that stopped or succeeded).

Metrics (namespace from METRICS_NAMESPACE, dimension JobName), every check: JobNotRunning (1 without an active
run, held or not), RestartsCapped (1 when capped) and DownSeconds (since the last run ended: an outage longer than
the source's retention loses records, so its alarm fires at half of it). The not-running alarm treats missing data as breaching, so
a keeper that stopped reporting alarms too.

Configuration (environment): JOBS, a JSON object {job name: {"maintenance_window": "SUN:03" or null}};
MAX_FAILURES_PER_HOUR; BACKOFF_SECONDS; METRICS_NAMESPACE; JOB_ARN_PREFIX (arn:<partition>:glue:<region>:<account>:job/).
"""

from __future__ import annotations

import hashlib
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
FAILED_STATES = frozenset({"FAILED", "TIMEOUT", "ERROR"})
HOLD_TAG = "streamlake:hold"
DEPLOY_TAG = "streamlake:deploy"
# On every streaming job, the bucket its checkpoints are in: the keeper may stop another job's runs that hold one of a
# job's checkpoints (release_checkpoints) only on jobs tagged with its environment's bucket (infra/job_keeper.py).
CHECKPOINT_BUCKET_TAG = "streamlake:checkpoint-bucket"
MAINTENANCE_HOURS = 3  # Glue restarts within 3 hours of the window's start (Glue API, Job.MaintenanceWindow)
MAINTENANCE_GRACE = timedelta(minutes=15)
_DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
STOP_WAIT_SECONDS = 600  # how long a deploy waits for a stopped run to end before leaving the start to the schedule
# A deploy's "stopping" mark older than this is left over from an invocation that died: checks ignore it.
DEPLOY_MARK_SECONDS = STOP_WAIT_SECONDS + 120
STOPPING = "stopping"


@dataclass(frozen=True)
class Policy:
    max_failures_per_hour: int = 4
    backoff_seconds: int = 60
    maintenance_window: str | None = None  # "SUN:03": day and hour, UTC (the config's maintenance_window)


@dataclass(frozen=True)
class Decision:
    start: bool
    state: str  # running | held | deploying | maintenance | capped | backoff | down | waiting (another job holds its checkpoint)
    reason: str
    down_seconds: float = 0.0  # since the last run ended (0 with an active run or before any run)
    run_id: str | None = None  # the run this check started

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True)
class DeployMark:
    """The DEPLOY_TAG value: which settings a deploy rolled (or is rolling) onto the job, and the run it started."""

    digest: str
    run_id: str  # STOPPING while the deploy waits for the old run to end
    at: datetime

    def __str__(self) -> str:
        return f"{self.digest} {self.run_id} {int(self.at.timestamp())}"

    @classmethod
    def parse(cls, value: str | None) -> DeployMark | None:
        parts = (value or "").split(" ")
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], datetime.fromtimestamp(int(parts[2]), timezone.utc))

    def stopping(self, now: datetime) -> bool:
        """A deploy is between its stop and its start (and has not died on the way)."""
        return self.run_id == STOPPING and now - self.at < timedelta(seconds=DEPLOY_MARK_SECONDS)


def settings_digest(properties: dict) -> str:
    """The digest of a deploy resource's settings: DigestFormula and CodeDigest (made at synth) and RunsWith (resolved
    by CloudFormation), so a replaced role or a renamed security configuration counts as a change."""
    what = {key: properties.get(key) for key in ("DigestFormula", "CodeDigest", "RunsWith")}
    return hashlib.sha256(json.dumps(what, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


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


def decide(runs: list[dict], *, held: str | None, now: datetime, policy: Policy,
           deploying: DeployMark | None = None) -> Decision:
    """What to do about one job, from its recent runs (GetJobRuns' JobRuns), its hold tag and its deploy mark (see
    the module doc)."""
    active = [r for r in runs if r["JobRunState"] in ACTIVE_STATES]
    if active:
        return Decision(False, "running", f"run {active[0]['Id']} is {active[0]['JobRunState']}")
    newest = max(runs, key=lambda r: r["StartedOn"]) if runs else None
    since_end = now - _ended(newest) if newest else None
    decision = _decide_down(runs, newest, since_end, held=held, now=now, policy=policy, deploying=deploying)
    return replace(decision, down_seconds=since_end.total_seconds() if since_end is not None else 0.0)


def _decide_down(runs: list[dict], newest: dict | None, since_end: timedelta | None, *, held: str | None,
                 now: datetime, policy: Policy, deploying: DeployMark | None) -> Decision:
    """decide() for a job without an active run, steps 2 to 7 of the module doc."""
    if held is not None:
        return Decision(False, "held", f"held by an operator ({HOLD_TAG}={held}): `job start` releases it")
    if deploying is not None and deploying.stopping(now):
        return Decision(False, "deploying", f"a deploy is restarting it on settings {deploying.digest[:12]} (since "
                                            f"{deploying.at:%H:%M:%S} UTC): the deploy starts it")
    if in_maintenance_window(now, policy.maintenance_window) and since_end is not None and since_end < MAINTENANCE_GRACE:
        return Decision(False, "maintenance", f"in the maintenance window {policy.maintenance_window}: Glue restarts the job")
    failed_last_hour = [r for r in runs if r["JobRunState"] in FAILED_STATES and r["StartedOn"] > now - timedelta(hours=1)]
    if len(failed_last_hour) >= policy.max_failures_per_hour:
        return Decision(False, "capped", f"{len(failed_last_hour)} runs started in the last hour failed (cap "
                                         f"{policy.max_failures_per_hour}): not restarted again; fix the cause, then `job start`")
    if newest is not None and newest["JobRunState"] in FAILED_STATES:
        wait = timedelta(seconds=policy.backoff_seconds * 2 ** max(0, len(failed_last_hour) - 1))
        if since_end < wait:
            return Decision(False, "backoff", f"the last run failed {int(since_end.total_seconds())} s ago; next start "
                                              f"after {int(wait.total_seconds())} s")
    why = "never started" if newest is None else f"last run {newest['Id']} {newest['JobRunState']}" + (
        f": {newest['ErrorMessage']}" if newest.get("ErrorMessage") else "")
    return Decision(True, "down", why)


class Keeper:
    """The checks and deploys against Glue and CloudWatch clients (boto3), for the jobs of one environment."""

    def __init__(self, glue, cloudwatch, *, jobs: dict[str, dict], namespace: str, max_failures_per_hour: int,
                 backoff_seconds: int, job_arn_prefix: str, clock=lambda: datetime.now(timezone.utc),
                 sleep=time.sleep) -> None:
        self.glue, self.cloudwatch, self.jobs, self.namespace = glue, cloudwatch, jobs, namespace
        self.max_failures_per_hour, self.backoff_seconds = max_failures_per_hour, backoff_seconds
        self.arn = job_arn_prefix + "{}"  # arn:<partition>:glue:<region>:<account>:job/
        self.clock, self.sleep = clock, sleep

    def policy(self, job_name: str) -> Policy:
        return Policy(self.max_failures_per_hour, self.backoff_seconds,
                      (self.jobs.get(job_name) or {}).get("maintenance_window"))

    def runs(self, job_name: str) -> list[dict]:
        return self.glue.get_job_runs(JobName=job_name, MaxResults=50).get("JobRuns", [])

    def tags(self, job_name: str) -> dict[str, str]:
        return self.glue.get_tags(ResourceArn=self.arn.format(job_name)).get("Tags", {})

    def check(self, job_name: str) -> Decision:
        """Decide for one job, start it if that is the decision, publish its metrics."""
        tags = self.tags(job_name)
        decision = decide(self.runs(job_name), held=tags.get(HOLD_TAG), now=self.clock(), policy=self.policy(job_name),
                          deploying=DeployMark.parse(tags.get(DEPLOY_TAG)))
        if decision.start:
            decision = self._start(job_name, decision)
        log.info("job %s: %s (%s)", job_name, decision.state, decision.reason)
        self._publish(job_name, decision)
        return decision

    def checkpoints(self, job: dict) -> set[str]:
        """The checkpoint locations a job's runs write: each source's in `--sources` (glue_jobs/glue_entry.py), or
        `--checkpoint_path` of a job from before jobs held several sources."""
        arguments = job.get("DefaultArguments") or {}
        if "--sources" in arguments:
            try:
                return {s["checkpoint_path"] for s in json.loads(arguments["--sources"]) if isinstance(s, dict) and "checkpoint_path" in s}
            except ValueError:
                return set()
        return {arguments["--checkpoint_path"]} if "--checkpoint_path" in arguments else set()

    def stop_checkpoint_holders(self, job_name: str) -> dict[str, set[str]]:
        """Stop the active runs of any other job that writes one of `job_name`'s checkpoints (a source moved to another
        job, a regrouping, docs/configuration.md "Streaming jobs", is run by its old job until CloudFormation deletes
        that job, after the new one was created and started); returns {job: the runs stopped}."""
        mine = self.checkpoints(self.glue.get_job(JobName=job_name)["Job"])
        holders: dict[str, set[str]] = {}
        for page in self.glue.get_paginator("get_jobs").paginate():
            for job in page["Jobs"]:
                if job["Name"] != job_name and self.checkpoints(job) & mine:
                    active = {r["Id"] for r in self.runs(job["Name"]) if r["JobRunState"] in ACTIVE_STATES}
                    if active:
                        log.info("job %s: stopping run(s) %s of job %s, which write(s) its checkpoint(s)", job_name,
                                 sorted(active), job["Name"])
                        self.glue.batch_stop_job_run(JobName=job["Name"], JobRunIds=sorted(active))
                        holders[job["Name"]] = active
        return holders

    def wait_for(self, stopped: dict[str, set[str]], deadline: float) -> list[str]:
        """Wait until every run in `stopped` ({job: run ids}) has ended, or `deadline` (time.monotonic) passes;
        returns the jobs whose runs are still active."""
        while True:
            left = sorted(name for name, ids in stopped.items()
                          if any(r["Id"] in ids and r["JobRunState"] in ACTIVE_STATES for r in self.runs(name)))
            if not left or time.monotonic() > deadline:
                return left
            self.sleep(10)

    def release_checkpoints(self, job_name: str) -> str | None:
        """Before `job_name` starts: stop the other jobs' runs on its checkpoints and wait for them to end (never two
        runs on one checkpoint). Returns None when no other run holds them, or why the start must wait."""
        left = self.wait_for(self.stop_checkpoint_holders(job_name), time.monotonic() + STOP_WAIT_SECONDS)
        return f"job(s) {', '.join(left)} still stopping, and they write its checkpoint(s)" if left else None

    def _start(self, job_name: str, decision: Decision) -> Decision:
        held = self.release_checkpoints(job_name)
        if held is not None:
            return Decision(False, "waiting", f"not started: {held}", decision.down_seconds)
        try:
            run_id = self.glue.start_job_run(JobName=job_name)["JobRunId"]
        except self.glue.exceptions.ConcurrentRunsExceededException:
            return Decision(False, "running", "a run started meanwhile (Glue refused a second one)", decision.down_seconds)
        return Decision(False, "running", f"started run {run_id}; {decision.reason}", decision.down_seconds, run_id)

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

    def _mark(self, job_name: str, mark: DeployMark | None) -> None:
        if mark is None:
            self.glue.untag_resource(ResourceArn=self.arn.format(job_name), TagsToRemove=[DEPLOY_TAG])
        else:
            self.glue.tag_resource(ResourceArn=self.arn.format(job_name), TagsToAdd={DEPLOY_TAG: str(mark)})

    def deploy(self, request_type: str, properties: dict, old_properties: dict | None) -> str:
        """The custom resource's work (see the module doc); returns what was done."""
        job_name = properties["JobName"]
        if request_type == "Create":
            return self.check(job_name).reason
        digest = settings_digest(properties)
        if request_type != "Update" or (old_properties is not None and settings_digest(old_properties) == digest):
            return "nothing to do"
        now = self.clock()
        mark = DeployMark.parse(self.tags(job_name).get(DEPLOY_TAG))
        active = [r for r in self.runs(job_name) if r["JobRunState"] in ACTIVE_STATES]
        if mark is not None and mark.digest == digest:
            if mark.run_id in {r["Id"] for r in active}:
                return f"run {mark.run_id} already runs settings {digest[:12]}: nothing to do (a repeated Update)"
            if mark.stopping(now):
                return f"a deploy of settings {digest[:12]} is under way: nothing to do (a repeated Update)"
        if not active:
            decision = self.check(job_name)
            if decision.run_id is not None:
                self._mark(job_name, DeployMark(digest, decision.run_id, now))
            return "settings changed; the job was not running: " + decision.reason
        self._mark(job_name, DeployMark(digest, STOPPING, now))
        try:
            return self._restart(job_name, digest, {r["Id"] for r in active})
        except Exception:
            self._mark(job_name, None)  # the checks take the job back at once
            raise

    def _restart(self, job_name: str, digest: str, stopped: set[str]) -> str:
        """Stop the runs `stopped` and any other job's runs on its checkpoints, wait for them (and only them) to end
        (one wait, within the function's timeout), start the job once."""
        self.glue.batch_stop_job_run(JobName=job_name, JobRunIds=sorted(stopped))
        waiting = {job_name: stopped, **self.stop_checkpoint_holders(job_name)}
        left = self.wait_for(waiting, time.monotonic() + STOP_WAIT_SECONDS)
        if left:
            self._mark(job_name, None)  # the schedule starts it once they have ended
            return (f"settings changed; stopped run {', '.join(sorted(stopped))}; job(s) {', '.join(left)} still "
                    f"stopping after {STOP_WAIT_SECONDS} s: the schedule starts it")
        try:
            run_id = self.glue.start_job_run(JobName=job_name)["JobRunId"]
            what = f"started run {run_id} on the new settings"
        except self.glue.exceptions.ConcurrentRunsExceededException:
            # Started by another invocation after the definition changed: it runs the new settings too.
            run_id = next((r["Id"] for r in self.runs(job_name) if r["JobRunState"] in ACTIVE_STATES), None)
            what = f"run {run_id} started meanwhile"
        self._mark(job_name, DeployMark(digest, run_id, self.clock()) if run_id else None)
        return f"settings changed; stopped run {', '.join(sorted(stopped))}, {what}"


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
                  namespace=os.environ["METRICS_NAMESPACE"], max_failures_per_hour=int(os.environ["MAX_FAILURES_PER_HOUR"]),
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
