"""The job keeper (infra/functions/job_keeper/handler.py) against moto's Glue and CloudWatch: what it starts, when it
waits, when it gives up, what it leaves alone, and how a deploy reaches a running job."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from infra.functions.job_keeper.handler import HOLD_TAG, Keeper, handle, in_maintenance_window
from tests.ops import moto_dev_env as dev_env

JOB = dev_env.STREAMING_JOB
ARN_PREFIX = f"arn:aws:glue:{dev_env.REGION}:{dev_env.ACCOUNT}:job/"
NAMESPACE = "StreamLake/Test"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return Clock()


def keeper(aws, clock, *, window: str | None = None, cap: int = 4) -> Keeper:
    return Keeper(aws.glue, aws.cloudwatch, jobs={JOB: {"maintenance_window": window}}, namespace=NAMESPACE,
                  max_failures_per_hour=cap, backoff_seconds=60, job_arn_prefix=ARN_PREFIX, clock=clock, sleep=lambda s: None)


def runs():
    return dev_env.glue_backend().jobs[JOB].job_runs


def end_runs(state: str, at: datetime, error: str | None = None) -> None:
    """Every active run ends in `state` at `at` (moto has no call that fails a run: its model is set directly)."""
    for run in runs():
        if run.status in ("STARTING", "RUNNING"):
            run.status, run.completed_on, run.modified_on = state, at, at


def metric(aws, name: str) -> list[float]:
    stats = aws.cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE, MetricName=name, Dimensions=[{"Name": "JobName", "Value": JOB}],
        StartTime=datetime.now(timezone.utc) - timedelta(hours=2), EndTime=datetime.now(timezone.utc) + timedelta(hours=2),
        Period=60, Statistics=["Maximum"])
    return [p["Maximum"] for p in stats["Datapoints"]]


def test_a_job_never_started_is_started_and_reported_running(aws, clock):
    assert runs() == []
    decision = keeper(aws, clock).check(JOB)
    assert decision.state == "running" and "never started" in decision.reason
    assert [r.status for r in runs()] == ["STARTING"]
    assert metric(aws, "JobNotRunning") == [0.0] and metric(aws, "RestartsCapped") == [0.0]
    assert keeper(aws, clock).check(JOB).reason.startswith("run ")  # active: nothing more is started
    assert len(runs()) == 1


def test_a_failed_run_is_restarted_with_backoff_then_the_cap_stops_restarts_and_reports_it(aws, clock):
    k = keeper(aws, clock, cap=3)
    k.check(JOB)  # start 1
    waits = []
    for attempt in range(1, 3):
        end_runs("FAILED", clock.now)
        clock.advance(30)
        held_back = k.check(JOB)
        assert held_back.state == "backoff" and round(held_back.down_seconds) == 30, held_back
        wait = 60 * 2 ** (attempt - 1)  # one, then two failed runs in the last hour
        waits.append(wait)
        assert held_back.reason.endswith(f"next start after {wait} s")
        clock.advance(wait - 30 + 1)
        assert k.check(JOB).state == "running"
    assert waits == [60, 120] and len(runs()) == 3
    end_runs("FAILED", clock.now)
    clock.advance(3600 - 60 - 120 - 10)  # the first run started under an hour ago: three failures in the hour
    capped = k.check(JOB)
    assert capped.state == "capped" and "3 runs started in the last hour failed (cap 3)" in capped.reason
    assert len(runs()) == 3
    assert max(metric(aws, "RestartsCapped")) == 1.0 and max(metric(aws, "JobNotRunning")) == 1.0
    assert round(capped.down_seconds) == 3600 - 60 - 120 - 10 and max(metric(aws, "DownSeconds")) == capped.down_seconds
    clock.advance(3600)  # an hour later the cap has expired
    assert k.check(JOB).state == "running" and len(runs()) == 4


@pytest.mark.parametrize("state", ["STOPPED", "TIMEOUT", "ERROR", "SUCCEEDED"])
def test_every_way_a_run_ends_is_restarted(aws, clock, state):
    k = keeper(aws, clock)
    k.check(JOB)
    end_runs(state, clock.now)
    clock.advance(61)
    decision = k.check(JOB)
    assert decision.state == "running" and f"{state}" in decision.reason and len(runs()) == 2


def test_a_deliberate_stop_is_left_alone_until_the_operator_starts_the_job(aws, clock):
    from operations import jobs

    k = keeper(aws, clock)
    k.check(JOB)
    dev_env.mark_runs_running(JOB)
    jobs.hold(aws.glue, ARN_PREFIX + JOB, reason="reindex")
    end_runs("STOPPED", clock.now)
    clock.advance(3600)
    decision = k.check(JOB)
    assert decision.state == "held" and "reindex" in decision.reason and len(runs()) == 1
    assert metric(aws, "JobNotRunning")[-1:] == [1.0] or 1.0 in metric(aws, "JobNotRunning")
    jobs.release(aws.glue, ARN_PREFIX + JOB)
    assert HOLD_TAG not in aws.glue.get_tags(ResourceArn=ARN_PREFIX + JOB)["Tags"]
    assert k.check(JOB).state == "running" and len(runs()) == 2


def test_in_the_maintenance_window_glues_own_restart_is_awaited(aws, clock):
    clock.now = datetime(2026, 11, 29, 3, 20, tzinfo=timezone.utc)  # a Sunday, 20 minutes into the window SUN:03
    assert in_maintenance_window(clock.now, "SUN:03") and not in_maintenance_window(clock.now, "SAT:03")
    assert in_maintenance_window(datetime(2026, 11, 29, 5, 59, tzinfo=timezone.utc), "SUN:03")
    assert not in_maintenance_window(datetime(2026, 11, 29, 6, 0, tzinfo=timezone.utc), "SUN:03")
    assert in_maintenance_window(datetime(2026, 11, 30, 1, 0, tzinfo=timezone.utc), "SUN:23")  # across the week's end
    k = keeper(aws, clock, window="SUN:03")
    aws.glue.start_job_run(JobName=JOB)
    for run in runs():
        run.started_on = clock.now - timedelta(days=7)
    end_runs("STOPPED", clock.now - timedelta(minutes=5))  # Glue stopped it for maintenance five minutes ago
    assert k.check(JOB).state == "maintenance" and len(runs()) == 1
    clock.advance(11 * 60)  # 16 minutes without a run: Glue's restart did not come
    assert k.check(JOB).state == "running" and len(runs()) == 2


def _deploy_event(request_type: str, digest: str, old_digest: str | None = None) -> dict:
    event = {"RequestType": request_type, "ResponseURL": "https://cloudformation-custom-resource-response.example/x",
             "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/s/1", "RequestId": "r1",
             "LogicalResourceId": "Deploy", "ResourceProperties": {"JobName": JOB, "CodeDigest": digest}}
    if old_digest is not None:
        event["OldResourceProperties"] = {"JobName": JOB, "CodeDigest": old_digest}
        event["PhysicalResourceId"] = f"deploy-{JOB}"
    return event


@pytest.fixture
def responses(monkeypatch):
    """CloudFormation's side: what the function PUTs to the ResponseURL."""
    import urllib.request

    sent = []

    class Response:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def urlopen(request, timeout):
        sent.append((request.full_url, request.get_method(), json.loads(request.data)))
        return Response()

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return sent


def test_the_first_deploy_starts_the_job(aws, clock, responses):
    result = handle(_deploy_event("Create", "d1"), keeper(aws, clock))
    assert "never started" in result["deploy"] and [r.status for r in runs()] == ["STARTING"]
    (url, method, body), = responses
    assert method == "PUT" and body["Status"] == "SUCCESS" and body["PhysicalResourceId"] == f"deploy-{JOB}"


def test_a_deploy_that_changed_the_code_restarts_the_running_job_and_an_unchanged_one_does_not(aws, clock, responses):
    k = keeper(aws, clock)
    k.check(JOB)
    dev_env.mark_runs_running(JOB)
    (first,) = runs()
    result = handle(_deploy_event("Update", "d1", old_digest="d1"), k)
    assert result == {"deploy": "nothing to do"} and [r.status for r in runs()] == ["RUNNING"]

    stops = []
    real_stop = aws.glue.batch_stop_job_run

    def stop(**kwargs):
        stops.append(kwargs)
        response = real_stop(**kwargs)
        end_runs("STOPPED", clock.now)  # the run ends while the function waits
        return response

    aws.glue.batch_stop_job_run = stop
    result = handle(_deploy_event("Update", "d2", old_digest="d1"), k)
    assert stops == [{"JobName": JOB, "JobRunIds": [first.job_run_id]}]
    assert "started run" in result["deploy"] and "on the new settings" in result["deploy"]
    assert sorted(r.status for r in runs()) == ["STARTING", "STOPPED"]
    assert [b["Status"] for _, _, b in responses] == ["SUCCESS", "SUCCESS"]


def test_a_deploy_of_new_code_to_a_stopped_job_starts_it_unless_held(aws, clock, responses):
    from operations import jobs

    jobs.hold(aws.glue, ARN_PREFIX + JOB, reason="paused")
    result = handle(_deploy_event("Update", "d2", old_digest="d1"), keeper(aws, clock))
    assert "held by an operator" in result["deploy"] and runs() == []
    handle(_deploy_event("Delete", "d2"), keeper(aws, clock))
    assert runs() == [] and responses[-1][2]["Status"] == "SUCCESS"


def test_schedule_checks_every_job_and_a_glue_event_checks_its_own(aws, clock):
    k = keeper(aws, clock)
    assert handle({"detail-type": "Scheduled Event", "source": "aws.events"}, k) == {JOB: "running"}
    end_runs("FAILED", clock.now)
    clock.advance(61)
    event = {"detail-type": "Glue Job State Change", "source": "aws.glue", "detail": {"jobName": JOB, "state": "FAILED"}}
    assert handle(event, k) == {JOB: "running"} and len(runs()) == 2
    other = {"detail-type": "Glue Job State Change", "source": "aws.glue", "detail": {"jobName": "someone-elses"}}
    assert handle(other, k) == {JOB: "running"}  # not ours: every job of the environment is checked instead


def test_one_jobs_failing_check_does_not_stop_the_others(aws, clock):
    """A scheduled check over two jobs where Glue answers the first with an error (here: a job deleted by hand):
    it is reported as "error" and the second job is still started and reported."""
    other = "streamlake-dev-deleted-by-hand"
    k = Keeper(aws.glue, aws.cloudwatch, jobs={other: {}, JOB: {}}, namespace=NAMESPACE, max_failures_per_hour=4,
               backoff_seconds=60, job_arn_prefix=ARN_PREFIX, clock=clock, sleep=lambda s: None)
    assert k.check_all() == {other: "error", JOB: "running"}
    assert [r.status for r in runs()] == ["STARTING"]


def _running_job(aws, clock) -> Keeper:
    k = keeper(aws, clock)
    k.check(JOB)
    dev_env.mark_runs_running(JOB)
    return k


def test_a_deploy_a_stopped_event_and_a_schedule_tick_together_make_one_start_and_no_false_backoff_or_cap(
        aws, clock, responses):
    """Without reserved concurrency the three can run at once. Here the STOPPED event of the run the deploy stops and a
    schedule tick arrive while the deploy waits for that run to end (they run inside its wait), and again once it has
    ended but before the deploy's start: neither starts the job, neither reports backoff or a cap, and the deploy
    starts it once. Four deploys in the hour never cap the job either (only failed runs count)."""
    k = _running_job(aws, clock)
    stopped_event = {"detail-type": "Glue Job State Change", "source": "aws.glue", "detail": {"jobName": JOB, "state": "STOPPED"}}
    tick = {"detail-type": "Scheduled Event", "source": "aws.events"}
    seen, starts = [], []
    real_start, real_stop = aws.glue.start_job_run, aws.glue.batch_stop_job_run

    def others_meanwhile():
        seen.append(handle(stopped_event, k)[JOB])
        seen.append(handle(tick, k)[JOB])

    def stop(**kwargs):
        response = real_stop(**kwargs)
        end_runs("STOPPED", clock.now)  # the run has ended: the event and a tick come in before the deploy starts it
        others_meanwhile()
        return response

    def start(**kwargs):
        others_meanwhile()  # and once more right before the start
        starts.append(kwargs)
        return real_start(**kwargs)

    aws.glue.start_job_run, aws.glue.batch_stop_job_run = start, stop
    for deploy in range(4):
        clock.advance(60)
        result = handle(_deploy_event("Update", f"d{deploy + 1}", old_digest=f"d{deploy}"), k)
        assert "started run" in result["deploy"], result
        dev_env.mark_runs_running(JOB)
    assert seen == ["deploying"] * 16  # no "backoff", no "capped", and no start of their own
    assert len(starts) == 4  # one per deploy
    assert sorted(r.status for r in runs()) == ["RUNNING"] + ["STOPPED"] * 4
    assert max(metric(aws, "RestartsCapped")) == 0.0
    assert handle(tick, k) == {JOB: "running"}


def test_a_repeated_update_does_not_restart_the_run_that_already_runs_its_settings(aws, clock, responses):
    """Lambda may deliver one asynchronous event more than once: the second Update of the same settings finds the job's
    deploy mark naming the active run and leaves it alone."""
    k = _running_job(aws, clock)
    k.sleep = lambda s: end_runs("STOPPED", clock.now)
    first = handle(_deploy_event("Update", "d2", old_digest="d1"), k)
    dev_env.mark_runs_running(JOB)
    (running,) = [r for r in runs() if r.status == "RUNNING"]
    assert running.job_run_id in first["deploy"]
    again = handle(_deploy_event("Update", "d2", old_digest="d1"), k)
    assert again["deploy"].startswith(f"run {running.job_run_id} already runs settings") and len(runs()) == 2
    assert [r.status for r in runs() if r.job_run_id == running.job_run_id] == ["RUNNING"]
    # A different setting (a worker type, a role) is a new digest: that one restarts.
    third = handle(_deploy_event("Update", "d3", old_digest="d2"), k)
    assert "started run" in third["deploy"] and len(runs()) == 3


def test_a_runs_with_change_alone_restarts_the_job(aws, clock, responses):
    """RunsWith carries what CloudFormation resolves (a replaced role has a new ARN under the same template text): the
    same CodeDigest with another role is a change."""
    k = _running_job(aws, clock)
    k.sleep = lambda s: end_runs("STOPPED", clock.now)
    event = _deploy_event("Update", "d1", old_digest="d1")
    event["OldResourceProperties"]["RunsWith"] = {"Role": "arn:aws:iam::123456789012:role/old"}
    event["ResourceProperties"]["RunsWith"] = {"Role": "arn:aws:iam::123456789012:role/new"}
    assert "started run" in handle(event, k)["deploy"] and len(runs()) == 2


def test_a_deploy_mark_left_by_a_dead_invocation_expires(aws, clock):
    """An invocation that died between its stop and its start leaves a "stopping" mark: checks wait for it no longer
    than DEPLOY_MARK_SECONDS, then start the job."""
    from infra.functions.job_keeper.handler import DEPLOY_MARK_SECONDS, DEPLOY_TAG, DeployMark

    k = _running_job(aws, clock)
    aws.glue.tag_resource(ResourceArn=ARN_PREFIX + JOB, TagsToAdd={DEPLOY_TAG: str(DeployMark("d" * 64, "stopping", clock.now))})
    end_runs("STOPPED", clock.now)
    assert k.check(JOB).state == "deploying" and len(runs()) == 1
    clock.advance(DEPLOY_MARK_SECONDS + 1)
    assert k.check(JOB).state == "running" and len(runs()) == 2


def _job_with(aws, name: str, arguments: dict) -> None:
    aws.glue.create_job(Name=name, Role="arn:aws:iam::123456789012:role/glue", GlueVersion="4.0",
                        Command={"Name": "gluestreaming", "ScriptLocation": "s3://assets/entrypoint.py"},
                        ExecutionProperty={"MaxConcurrentRuns": 1}, DefaultArguments=arguments)


def test_a_job_that_takes_over_a_moved_source_stops_the_old_jobs_run_first(aws, clock):
    """A regrouping: orders moves from its own job (deployed before jobs held several sources: `--checkpoint_path`)
    into a shared job (`--sources`). CloudFormation creates and starts the shared job before it deletes the old one;
    the keeper stops the old job's run and starts the new job only once that run has ended. A job on another
    checkpoint is left running."""
    checkpoint = "s3://checkpoints-bucket/checkpoints/orders/"
    _job_with(aws, "old-orders", {"--checkpoint_path": checkpoint})
    _job_with(aws, "shared", {"--sources": json.dumps([
        {"source_name": "orders", "checkpoint_path": checkpoint},
        {"source_name": "payments", "checkpoint_path": "s3://checkpoints-bucket/checkpoints/payments/"}])})
    aws.glue.start_job_run(JobName="old-orders")
    aws.glue.start_job_run(JobName=JOB)  # clickstream's job: another checkpoint
    dev_env.mark_runs_running("old-orders")
    k = Keeper(aws.glue, aws.cloudwatch, jobs={"shared": {}}, namespace=NAMESPACE, max_failures_per_hour=4,
               backoff_seconds=60, job_arn_prefix=ARN_PREFIX, clock=clock, sleep=lambda s: None)
    stops = []
    real_stop = aws.glue.batch_stop_job_run

    def stop(**kwargs):
        stops.append((kwargs["JobName"], [r["JobRunState"] for r in k.runs("shared")]))  # what ran when it stopped
        return real_stop(**kwargs)

    aws.glue.batch_stop_job_run = stop
    decision = k.check("shared")
    assert decision.state == "running" and decision.run_id is not None
    assert stops == [("old-orders", [])]  # stopped before the shared job had a run
    assert [r["JobRunState"] for r in k.runs("old-orders")] == ["STOPPED"]
    assert [r["JobRunState"] for r in k.runs(JOB)] == ["STARTING"]  # not a holder: untouched
    assert k.checkpoints({"DefaultArguments": {"--sources": "not json"}}) == set()


def test_a_start_waits_while_the_old_job_still_stops(aws, clock):
    checkpoint = "s3://checkpoints-bucket/checkpoints/orders/"
    _job_with(aws, "old-orders", {"--checkpoint_path": checkpoint})
    _job_with(aws, "shared", {"--sources": json.dumps([{"source_name": "orders", "checkpoint_path": checkpoint}])})
    aws.glue.start_job_run(JobName="old-orders")
    dev_env.mark_runs_running("old-orders")
    k = Keeper(aws.glue, aws.cloudwatch, jobs={"shared": {}}, namespace=NAMESPACE, max_failures_per_hour=4,
               backoff_seconds=60, job_arn_prefix=ARN_PREFIX, clock=clock, sleep=lambda s: None)
    aws.glue.batch_stop_job_run = lambda **kwargs: {"SuccessfulSubmissions": [], "Errors": []}  # a stop that never lands
    import infra.functions.job_keeper.handler as handler

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(handler, "STOP_WAIT_SECONDS", -1)
        decision = k.check("shared")
    assert decision.state == "waiting" and "old-orders still stopping" in decision.reason
    assert k.runs("shared") == []  # not started: the old run still holds the checkpoint
