"""Glue job control: start/stop a streaming job, its current run and consumer lag, checkpoint reset,
and an on-demand compaction of one hour.

Glue facts relied on:
- A streaming job has at most one run (MaxConcurrentRuns 1, set by infra/streaming_job.py); the
  current run is the one in an active state. Stopping is BatchStopJobRun on that run id.
- Consumer lag: CloudWatch `Glue` / `glue.driver.streaming.maxConsumerLagInMs`, dimensions
  JobName, JobRunId=ALL, Type=gauge, published when the source sets emitConsumerLagMetrics
  (https://docs.aws.amazon.com/glue/latest/dg/monitoring-awsglue-with-cloudwatch-metrics.html).
- The checkpoint is Spark's: deleting it makes the next run start from the job's starting position
  (TRIM_HORIZON / earliest), i.e. reprocess what the stream still retains. Never while running.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from operations.errors import ToolError

ACTIVE_STATES = frozenset({"STARTING", "RUNNING", "STOPPING", "WAITING"})
LAG_METRIC = "glue.driver.streaming.maxConsumerLagInMs"
LAG_LOOKBACK = timedelta(minutes=15)
# The compaction job's Glue argument naming the hour to compact (compaction/ entrypoint).
COMPACTION_HOUR_ARGUMENT = "--hour"
HOUR_FORMAT = "%Y-%m-%dT%H"
_HOUR_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}$")


@dataclass(frozen=True)
class Run:
    run_id: str
    state: str
    started_on: datetime | None
    arguments: dict

    @classmethod
    def from_api(cls, run: dict) -> Run:
        return cls(run["Id"], run["JobRunState"], run.get("StartedOn"), run.get("Arguments", {}))

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


def _job_error(exc, job_name: str) -> ToolError:
    code = exc.response.get("Error", {}).get("Code", "")
    if code == "EntityNotFoundException":
        return ToolError(f"Glue job {job_name!r} does not exist (stack outputs and account/region disagree?)")
    return ToolError(f"Glue job {job_name!r}: {code}: {exc.response.get('Error', {}).get('Message', exc)}")


def recent_runs(glue, job_name: str, limit: int = 25) -> list[Run]:
    """The job's most recent runs, newest first."""
    from botocore.exceptions import ClientError

    try:
        runs = glue.get_job_runs(JobName=job_name, MaxResults=limit).get("JobRuns", [])
    except ClientError as exc:
        raise _job_error(exc, job_name) from None
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return sorted((Run.from_api(r) for r in runs), key=lambda r: r.started_on or epoch, reverse=True)


def current_run(glue, job_name: str) -> Run | None:
    return next((r for r in recent_runs(glue, job_name) if r.active), None)


# The job keeper (infra/functions/job_keeper/handler.py) leaves a job carrying this tag alone: an operator's stop.
HOLD_TAG = "streamlake:hold"


def job_arn(session, job_name: str) -> str:
    """The job's ARN (tags are set on it): account from STS, partition from the session's region."""
    region = session.region_name
    account = session.client("sts").get_caller_identity()["Account"]
    return f"arn:{session.get_partition_for_region(region)}:glue:{region}:{account}:job/{job_name}"


def hold(glue, arn: str, *, reason: str) -> None:
    """Mark the job as stopped on purpose, so the keeper does not start it again (`job stop`)."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    glue.tag_resource(ResourceArn=arn, TagsToAdd={HOLD_TAG: f"{reason} since {stamp}"[:256]})


def release(glue, arn: str) -> None:
    """Let the keeper keep the job running again (`job start`)."""
    glue.untag_resource(ResourceArn=arn, TagsToRemove=[HOLD_TAG])


def start(glue, job_name: str, arguments: dict[str, str] | None = None, *,
          busy_hint: str = "stop it first") -> str:
    from botocore.exceptions import ClientError

    running = current_run(glue, job_name)
    if running is not None:
        raise ToolError(f"job {job_name!r} already has an active run {running.run_id} ({running.state}); "
                        f"{busy_hint}")
    try:
        return glue.start_job_run(JobName=job_name, **({"Arguments": arguments} if arguments else {}))["JobRunId"]
    except ClientError as exc:
        raise _job_error(exc, job_name) from None


def stop(glue, job_name: str, *, wait: bool = True, timeout_s: float = 600, poll_s: float = 5,
         sleep: Callable[[float], None] = time.sleep) -> Run | None:
    """Stop the active run; with `wait`, return once it reached a final state. None if nothing ran."""
    from botocore.exceptions import ClientError

    run = current_run(glue, job_name)
    if run is None:
        return None
    # A run already STOPPING needs no second request (Glue may refuse one for a run not in a stoppable
    # state): wait for it like for any other.
    if run.state != "STOPPING":
        try:
            response = glue.batch_stop_job_run(JobName=job_name, JobRunIds=[run.run_id])
        except ClientError as exc:
            raise _job_error(exc, job_name) from None
        errors = response.get("Errors", [])
        if errors:
            # Refused because the run moved on meanwhile (stopping or ended on its own): not a failure.
            state = _run_state(glue, job_name, run.run_id)
            if state in ACTIVE_STATES and state != "STOPPING":
                detail = errors[0].get("ErrorDetail", {})
                raise ToolError(f"Glue refused to stop run {run.run_id} of {job_name!r} ({state}): "
                                f"{detail.get('ErrorCode', '')}: {detail.get('ErrorMessage', '')}")
    if not wait:
        return run
    deadline = time.monotonic() + timeout_s
    while True:
        state = _run_state(glue, job_name, run.run_id)
        if state not in ACTIVE_STATES:
            return Run(run.run_id, state, run.started_on, run.arguments)
        if time.monotonic() >= deadline:
            raise ToolError(f"run {run.run_id} of {job_name!r} is still {state} after {timeout_s:.0f}s")
        sleep(poll_s)


def _run_state(glue, job_name: str, run_id: str) -> str:
    from botocore.exceptions import ClientError

    try:
        return glue.get_job_run(JobName=job_name, RunId=run_id)["JobRun"]["JobRunState"]
    except ClientError as exc:
        raise _job_error(exc, job_name) from None


@dataclass(frozen=True)
class Lag:
    value_ms: float
    at: datetime


def consumer_lag(cloudwatch, job_name: str, now: datetime | None = None) -> Lag | None:
    """The latest maxConsumerLagInMs datapoint of the last 15 minutes, or None."""
    now = now or datetime.now(timezone.utc)
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[{
            "Id": "lag",
            "MetricStat": {
                "Metric": {
                    "Namespace": "Glue",
                    "MetricName": LAG_METRIC,
                    "Dimensions": [
                        {"Name": "JobName", "Value": job_name},
                        {"Name": "JobRunId", "Value": "ALL"},
                        {"Name": "Type", "Value": "gauge"},
                    ],
                },
                "Period": 60,
                "Stat": "Maximum",
            },
        }],
        StartTime=now - LAG_LOOKBACK,
        EndTime=now,
        ScanBy="TimestampDescending",
    )
    for result in response.get("MetricDataResults", []):
        if result.get("Values"):
            pairs = sorted(zip(result["Timestamps"], result["Values"], strict=True), reverse=True)
            return Lag(value_ms=pairs[0][1], at=pairs[0][0])
    return None


def status_lines(glue, cloudwatch, job_name: str) -> list[str]:
    runs = recent_runs(glue, job_name)
    active = next((r for r in runs if r.active), None)
    lines = [f"job:          {job_name}"]
    if active is not None:
        lines.append(f"current run:  {active.run_id} {active.state} since {_fmt_time(active.started_on)}")
    else:
        last = runs[0] if runs else None
        lines.append("current run:  none" + (f" (last: {last.run_id} {last.state} started {_fmt_time(last.started_on)})"
                                               if last else " (the job has never run)"))
    lag = consumer_lag(cloudwatch, job_name)
    if lag is None:
        lines.append(f"consumer lag: no datapoint in the last {int(LAG_LOOKBACK.total_seconds() // 60)} minutes "
                     "(job not running, or emitConsumerLagMetrics off)")
    else:
        lines.append(f"consumer lag: {lag.value_ms:.0f} ms at {_fmt_time(lag.at)}")
    return lines


def last_batch_line(s3, checkpoint_uri: str) -> str:
    """A source's last committed micro-batch, from the commit markers in its checkpoint
    (`_streamlake/batch-<id>.committed.json`, glue_jobs/commit/__init__.py): its id and when it was written. A routed
    source's markers are in a folder per part, `_routes/<dataset>/_streamlake/` and `_routes/_unroutable/_streamlake/`
    (glue_jobs/routed_batch.py); each part in the route commits every batch, so a batch is committed once every part
    that committed the batch before it has committed it too (a dataset taken out of the route stops at its last
    batch and holds nothing up; a part behind after a crash does)."""
    bucket, prefix = parse_s3_uri(checkpoint_uri, "checkpoint path")
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    single: dict[int, datetime] = {}
    parts: dict[str, dict[int, datetime]] = {}
    for listed in (prefix + "_streamlake/batch-", prefix + "_routes/"):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=listed):
            for obj in page.get("Contents", []):
                key = obj["Key"][len(prefix):]
                match = re.fullmatch(r"(?:_routes/([^/]+)/)?_streamlake/batch-(\d+)\.committed\.json", key)
                if match:
                    found = parts.setdefault(match.group(1), {}) if match.group(1) else single
                    found[int(match.group(2))] = obj["LastModified"]
    if parts:
        for batch in sorted(set().union(*parts.values()), reverse=True):  # Spark's batch ids are consecutive
            active = [p for p in parts.values() if max(p) >= batch - 1]
            if all(batch in p for p in active):
                return f"last committed batch {batch} at {_fmt_time(max(p[batch] for p in active))} (by each of its " \
                       f"{len(active)} parts)"
        return f"no batch committed by every part yet ({', '.join(sorted(parts))})"
    if not single:
        return "no committed batch yet"
    newest = max(single)
    return f"last committed batch {newest} at {_fmt_time(single[newest])}"


def _fmt_time(value: datetime | None) -> str:
    if value is None:
        return "?"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_s3_uri(uri: str, what: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ToolError(f"{what} {uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    if not bucket:
        raise ToolError(f"{what} {uri!r} has no bucket")
    return bucket, prefix


def checkpoint_objects(s3, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return keys


def reset_checkpoint(glue, s3, job_name: str, checkpoint_uri: str, source: str, *, assume_yes: bool,
                     confirm: Callable[[str], str] | None = None, out=sys.stdout) -> int:
    """Delete the job's checkpoint prefix; refused while the job has an active run. Returns objects deleted."""
    bucket, prefix = parse_s3_uri(checkpoint_uri, "checkpoint path")
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    # A guard against a wrong output value: never delete a bucket root or someone else's prefix.
    if f"/{source}/" not in f"/{prefix}":
        raise ToolError(f"checkpoint path {checkpoint_uri!r} does not end in the source folder '{source}/'; "
                        "refusing to delete it")
    running = current_run(glue, job_name)
    if running is not None:
        raise ToolError(f"job {job_name!r} is {running.state} (run {running.run_id}); stop it first "
                        f"(streamlake job stop ...): a running job rewrites its checkpoint")
    keys = checkpoint_objects(s3, bucket, prefix)
    if not keys:
        print(f"nothing to delete: s3://{bucket}/{prefix} is empty", file=out)
        return 0
    print(f"{len(keys)} checkpoint object(s) under s3://{bucket}/{prefix} will be deleted. The next run of "
          f"{job_name} starts from its configured starting position and reprocesses what the stream retains.",
          file=out)
    if not assume_yes:
        if confirm is None:
            raise ToolError("confirmation needed: run in a terminal to answer the prompt, or pass --yes")
        answer = confirm(f"type the source name ({source}) to delete: ")
        if answer.strip() != source:
            raise ToolError("not confirmed; nothing deleted")
    deleted = 0
    for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
        chunk = keys[start:start + 1000]
        response = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True})
        errors = response.get("Errors", [])
        deleted += len(chunk) - len(errors)
        if errors:
            first = errors[0]
            # A half-deleted checkpoint is neither the old position nor a clean start: the job must not
            # start on it.
            raise ToolError(f"could not delete {len(errors)} object(s), e.g. {first['Key']}: {first.get('Code')}: "
                            f"{first.get('Message')}. {deleted} of {len(keys)} were deleted, so the checkpoint is "
                            f"incomplete: run reset-checkpoint again until it succeeds, and do not start {job_name} "
                            "before it has")
    print(f"deleted {len(keys)} object(s) from s3://{bucket}/{prefix}", file=out)
    return len(keys)


def parse_hour(value: str, now: datetime | None = None, grace_minutes: int = 0) -> str:
    """Validate YYYY-MM-DDTHH (UTC); refuse hours that are not closed yet: the job refuses an hour until its
    end plus `grace_minutes` (compaction.discovery.check_hour_closed), and a refused run would fail and alarm."""
    if not _HOUR_RE.match(value):
        raise ToolError(f"--hour {value!r}: expected YYYY-MM-DDTHH in UTC, e.g. 2024-05-01T13")
    try:
        hour = datetime.strptime(value, HOUR_FORMAT).replace(tzinfo=timezone.utc)
    except ValueError as exc:
        raise ToolError(f"--hour {value!r}: not a real hour ({exc})") from None
    now = now or datetime.now(timezone.utc)
    if hour > now:
        raise ToolError(f"--hour {value!r} is in the future (now {now.strftime(HOUR_FORMAT)} UTC)")
    closes = hour + timedelta(hours=1, minutes=grace_minutes)
    if closes > now:
        raise ToolError(f"--hour {value!r} is not closed yet: it can be compacted from {closes:%Y-%m-%dT%H:%M}Z "
                        f"(end of the hour + grace_minutes={grace_minutes}); the job would refuse it")
    return value


def compact(glue, job_name: str, hour: str | None = None, *, scan: bool = False) -> str:
    """Start the compaction job for one hour, or (scan) for every hour of its lookback window instead of
    the partitions log (files written by anything but the streaming jobs are in no log entry)."""
    if (hour is None) == (not scan):
        raise ToolError("compact: give exactly one of an hour or scan")
    arguments = {COMPACTION_HOUR_ARGUMENT: hour} if hour is not None else {"--scan": "true"}
    return start(glue, job_name, arguments,
                 busy_hint="the job runs one compaction at a time; wait for it to finish and retry")
