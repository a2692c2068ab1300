"""Job control against in-process moto Glue, S3 and CloudWatch."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest

from operations import jobs
from operations.errors import ToolError
from tests.ops import moto_dev_env as dev_env

NOW = datetime(2024, 5, 1, 14, 20, tzinfo=timezone.utc)


def _states(aws, job=dev_env.STREAMING_JOB) -> list[str]:
    return [r["JobRunState"] for r in aws.glue.get_job_runs(JobName=job)["JobRuns"]]


def test_start_status_stop(aws):
    run_id = jobs.start(aws.glue, dev_env.STREAMING_JOB)
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)
    assert jobs.current_run(aws.glue, dev_env.STREAMING_JOB).run_id == run_id

    with pytest.raises(ToolError, match=f"already has an active run {run_id} \\(RUNNING\\); stop it first"):
        jobs.start(aws.glue, dev_env.STREAMING_JOB)

    stopped = jobs.stop(aws.glue, dev_env.STREAMING_JOB, sleep=lambda s: None)
    assert (stopped.run_id, stopped.state) == (run_id, "STOPPED")
    assert jobs.current_run(aws.glue, dev_env.STREAMING_JOB) is None
    assert jobs.stop(aws.glue, dev_env.STREAMING_JOB) is None  # nothing to stop


def test_stopping_a_run_already_stopping_waits_for_it_without_a_second_request(aws):
    run_id = jobs.start(aws.glue, dev_env.STREAMING_JOB)
    (run,) = dev_env.glue_backend().jobs[dev_env.STREAMING_JOB].job_runs
    run.status = "STOPPING"
    requests = []
    real = aws.glue.batch_stop_job_run
    aws.glue.batch_stop_job_run = lambda **kw: requests.append(kw) or real(**kw)

    def stop_completes(_seconds):
        run.status = "STOPPED"

    stopped = jobs.stop(aws.glue, dev_env.STREAMING_JOB, sleep=stop_completes)
    assert (stopped.run_id, stopped.state, requests) == (run_id, "STOPPED", [])


def test_status_shows_the_current_run_and_the_latest_consumer_lag(aws):
    run_id = jobs.start(aws.glue, dev_env.STREAMING_JOB)
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)
    dimensions = [{"Name": "JobName", "Value": dev_env.STREAMING_JOB}, {"Name": "JobRunId", "Value": "ALL"},
                  {"Name": "Type", "Value": "gauge"}]
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    for minutes_ago, lag in ((6, 9000.0), (2, 1234.0)):
        aws.cloudwatch.put_metric_data(Namespace="Glue", MetricData=[{
            "MetricName": jobs.LAG_METRIC, "Dimensions": dimensions, "Value": lag,
            "Timestamp": now - timedelta(minutes=minutes_ago)}])
    # Same metric of another job: must not be picked up.
    other = [dict(d, Value="other-job") if d["Name"] == "JobName" else d for d in dimensions]
    aws.cloudwatch.put_metric_data(Namespace="Glue", MetricData=[{
        "MetricName": jobs.LAG_METRIC, "Dimensions": other, "Value": 99999.0, "Timestamp": now - timedelta(minutes=1)}])

    lines = jobs.status_lines(aws.glue, aws.cloudwatch, dev_env.STREAMING_JOB)

    assert lines[0] == f"job:          {dev_env.STREAMING_JOB}"
    assert lines[1].startswith(f"current run:  {run_id} RUNNING since ")
    # The newest datapoint wins (moto stamps it with the start of its period, CloudWatch with the minute).
    assert lines[2].startswith("consumer lag: 1234 ms at ")


def test_status_without_runs_or_metrics(aws):
    assert jobs.status_lines(aws.glue, aws.cloudwatch, dev_env.STREAMING_JOB)[1:] == [
        "current run:  none (the job has never run)",
        "consumer lag: no datapoint in the last 15 minutes (job not running, or emitConsumerLagMetrics off)",
    ]


def _put_checkpoint(aws, count=3):
    for i in range(count):
        aws.s3.put_object(Bucket=dev_env.CHECKPOINT_BUCKET, Key=f"checkpoints/{dev_env.SOURCE}/offsets/{i}", Body=b"{}")
    aws.s3.put_object(Bucket=dev_env.CHECKPOINT_BUCKET, Key="checkpoints/other/offsets/0", Body=b"{}")


def _keys(aws) -> list[str]:
    return [o["Key"] for o in aws.s3.list_objects_v2(Bucket=dev_env.CHECKPOINT_BUCKET).get("Contents", [])]


def test_checkpoint_reset_refuses_while_the_job_runs(aws):
    _put_checkpoint(aws)
    jobs.start(aws.glue, dev_env.STREAMING_JOB)
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)
    with pytest.raises(ToolError, match="is RUNNING .* stop it first"):
        jobs.reset_checkpoint(aws.glue, aws.s3, dev_env.STREAMING_JOB, dev_env.CHECKPOINT_PATH, dev_env.SOURCE,
                              assume_yes=True)
    assert len(_keys(aws)) == 4


def test_checkpoint_reset_deletes_only_the_source_prefix_once_confirmed(aws):
    _put_checkpoint(aws)
    out = io.StringIO()
    with pytest.raises(ToolError, match="not confirmed; nothing deleted"):
        jobs.reset_checkpoint(aws.glue, aws.s3, dev_env.STREAMING_JOB, dev_env.CHECKPOINT_PATH, dev_env.SOURCE,
                              assume_yes=False, confirm=lambda prompt: "y", out=out)
    with pytest.raises(ToolError, match="confirmation needed: .* or pass --yes"):
        jobs.reset_checkpoint(aws.glue, aws.s3, dev_env.STREAMING_JOB, dev_env.CHECKPOINT_PATH, dev_env.SOURCE,
                              assume_yes=False, confirm=None, out=out)
    assert len(_keys(aws)) == 4

    prompts = []
    deleted = jobs.reset_checkpoint(aws.glue, aws.s3, dev_env.STREAMING_JOB, dev_env.CHECKPOINT_PATH, dev_env.SOURCE,
                                    assume_yes=False, confirm=lambda p: prompts.append(p) or "clickstream", out=out)
    assert deleted == 3 and prompts == ["type the source name (clickstream) to delete: "]
    assert _keys(aws) == ["checkpoints/other/offsets/0"]


def test_checkpoint_reset_refuses_a_path_that_is_not_the_sources_folder(aws):
    with pytest.raises(ToolError, match="does not end in the source folder 'clickstream/'; refusing"):
        jobs.reset_checkpoint(aws.glue, aws.s3, dev_env.STREAMING_JOB, f"s3://{dev_env.CHECKPOINT_BUCKET}/",
                              dev_env.SOURCE, assume_yes=True)


@pytest.mark.parametrize("hour, message", [
    ("2024-05-01 13", "expected YYYY-MM-DDTHH"),
    ("2024-05-01T1", "expected YYYY-MM-DDTHH"),
    ("2024-05-01T13:00", "expected YYYY-MM-DDTHH"),
    ("2024-02-30T10", "not a real hour"),
    ("2024-05-01T24", "not a real hour"),
    ("2024-05-01T15", "is in the future"),
])
def test_compaction_hour_is_validated(hour, message):
    with pytest.raises(ToolError, match=message):
        jobs.parse_hour(hour, now=NOW)
    assert jobs.parse_hour("2024-05-01T13", now=NOW) == "2024-05-01T13"


def test_an_hour_not_closed_yet_is_refused_before_the_job_would_refuse_it():
    """The job compacts an hour from its end + grace_minutes on (compaction.discovery.check_hour_closed)."""
    assert NOW.strftime("%H:%M") == "14:20"
    with pytest.raises(ToolError, match=r"not closed yet: it can be compacted from 2024-05-01T15:15Z"):
        jobs.parse_hour("2024-05-01T14", now=NOW, grace_minutes=15)
    with pytest.raises(ToolError, match=r"from 2024-05-01T15:30Z"):
        jobs.parse_hour("2024-05-01T13", now=NOW, grace_minutes=90)
    assert jobs.parse_hour("2024-05-01T13", now=NOW, grace_minutes=15) == "2024-05-01T13"


def test_compaction_is_started_with_the_hour_argument(aws):
    run_id = jobs.compact(aws.glue, dev_env.COMPACTION_JOB, "2024-05-01T13")
    run = aws.glue.get_job_run(JobName=dev_env.COMPACTION_JOB, RunId=run_id)["JobRun"]
    assert run["Arguments"] == {"--hour": "2024-05-01T13"}
    with pytest.raises(ToolError, match="runs one compaction at a time; wait for it to finish"):
        jobs.compact(aws.glue, dev_env.COMPACTION_JOB, "2024-05-01T12")


def test_a_partly_failed_checkpoint_reset_says_to_rerun_before_the_job_starts(aws):
    _put_checkpoint(aws, count=3)
    real = aws.s3.delete_objects

    def one_denied(**kwargs):
        objects = kwargs["Delete"]["Objects"]
        real(**{**kwargs, "Delete": {**kwargs["Delete"], "Objects": objects[1:]}})
        return {"Errors": [{"Key": objects[0]["Key"], "Code": "AccessDenied", "Message": "denied"}]}

    aws.s3.delete_objects = one_denied
    with pytest.raises(ToolError, match=r"AccessDenied: denied\. 2 of 3 were deleted, so the checkpoint is incomplete: run "
                                        r"reset-checkpoint again until it succeeds, and do not start .* before it has"):
        jobs.reset_checkpoint(aws.glue, aws.s3, dev_env.STREAMING_JOB, dev_env.CHECKPOINT_PATH, dev_env.SOURCE,
                              assume_yes=True, out=io.StringIO())
