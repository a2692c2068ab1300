"""`python -m operations ...` (what `streamlake <command>` runs) as a separate process against a moto server (AWS_ENDPOINT_URL)."""

from __future__ import annotations

import json
import re

from tests.ops import moto_dev_env as dev_env
from tests.ops.test_producer import read_stream

SCHEMA_ID = {"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA}
ENV = ("--environment", dev_env.ENV)


def _events(n: int) -> list[str]:
    return [json.dumps({"event_id": f"e{i}", "event_type": "click", "event_time": 1714567200000 + i}) for i in range(n)]


def _start_running_job(deployed) -> str:
    run_id = deployed.client("glue").start_job_run(JobName=dev_env.STREAMING_JOB)["JobRunId"]
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)  # the server runs in this process: same moto backend
    return run_id


def test_produce_sends_a_file_with_progress_and_a_final_count(deployed, tmp_path):
    path = tmp_path / "events.ndjson"
    path.write_text(_events(1)[0] + "\n\n" + "\n".join(_events(3)[1:]) + "\n  \n")  # two blank lines: counted, not sent

    result = deployed.cli("produce", *ENV, "--source", dev_env.SOURCE, "--file", str(path))

    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"sent 3 of 3 records to {dev_env.STREAM} in 1 PutRecords call(s)\n"
                             f"skipped 2 blank line(s) of {path}: a blank line is no record, so none was sent for it\n")
    assert "3/3 records (100%)" in result.stderr
    assert sorted(read_stream(deployed.client("kinesis"))) == sorted(
        (f"e{i}", line.encode()) for i, line in enumerate(_events(3)))


def test_produce_sends_a_routed_mix_to_devs_routed_stream_as_generate_made_it(deployed, tmp_path):
    """docs/datasets.md "A routed stream in an environment": `generate` makes a mix for dev's routed stream `events`
    (page_views and checkouts by `kind`, records no route takes, bad records with lines cut short); `produce` refuses
    the lines that are not JSON, sending nothing, until --allow-invalid-json, and then sends every line as written."""
    import subprocess
    import sys

    mix = tmp_path / "mix"
    made = subprocess.run([sys.executable, "-m", "glue_jobs", "generate", "--out", str(mix), "--records", "200",
                           "--files", "1", "--bad-ratio", "0.2", "--seed", "3", "--route-field", "kind",
                           "--route", "page_view=page_views", "--route", "checkout=checkouts"],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    (path,) = mix.iterdir()
    lines = path.read_text(encoding="utf-8").splitlines()

    def is_json(line: str) -> bool:
        try:
            json.loads(line)
        except ValueError:
            return False
        return True

    assert len(lines) == 200 and not all(is_json(line) for line in lines)
    refused = deployed.cli("produce", *ENV, "--source", "events", "--file", str(path), "--no-progress")
    assert refused.returncode == 1 and "not valid JSON" in refused.stderr and "--allow-invalid-json" in refused.stderr
    assert read_stream(deployed.client("kinesis"), dev_env.EVENTS_STREAM) == []

    sent = deployed.cli("produce", *ENV, "--dataset", "page_views", "--file", str(path), "--no-progress",
                        "--allow-invalid-json")  # the one source that carries page_views: events
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.startswith(f"sent 200 of 200 records to {dev_env.EVENTS_STREAM} in ")
    assert sorted(data for _, data in read_stream(deployed.client("kinesis"), dev_env.EVENTS_STREAM)) == sorted(
        line.encode() for line in lines)
    assert read_stream(deployed.client("kinesis")) == []  # nothing on clickstream's stream


def test_produce_refuses_a_record_over_1_mib_and_sends_nothing(deployed, tmp_path):
    path = tmp_path / "events.ndjson"
    huge = json.dumps({"event_id": "huge", "metadata": "m" * (1024 * 1024)})
    path.write_text(_events(1)[0] + "\n" + huge + "\n")

    result = deployed.cli("produce", *ENV, "--source", dev_env.SOURCE, "--file", str(path), "--no-progress")

    assert result.returncode == 1
    assert f"error: {path} line 2: record is {len(huge) + 4} bytes with its partition key; Kinesis accepts at most " \
           "1048576 bytes (1 MiB) per record. Nothing was sent." in result.stderr
    assert read_stream(deployed.client("kinesis")) == []


def test_arguments_are_validated_with_clear_errors(deployed, tmp_path):
    bad_attempts = deployed.cli("produce", *ENV, "--source", dev_env.SOURCE, "--file", "x", "--max-attempts", "0")
    assert bad_attempts.returncode == 2 and "--max-attempts: 0 is outside 1..20" in bad_attempts.stderr

    checks = [
        (("produce", "--environment", "qa", "--source", dev_env.SOURCE, "--file", __file__),
         "--environment 'qa' is not an environment of the config; configured: dev, staging, prod"),
        (("produce", *ENV, "--source", "nope", "--file", __file__),
         "--source 'nope' is not a source of environment 'dev'; configured: clickstream"),
        (("produce", *ENV, "--source", dev_env.SOURCE, "--file", str(tmp_path / "missing.ndjson")),
         f"--file '{tmp_path / 'missing.ndjson'}': no such file"),
        (("produce", *ENV, "--source", dev_env.SOURCE, "--dead-letters", "--reason", "typo"),
         "--reason 'typo' is not a reason code; known: malformed_json, missing_required_field, invalid_type, "
         "out_of_range"),
        (("compact", *ENV, "--hour", "2024-5-1T3"), "--hour '2024-5-1T3': expected YYYY-MM-DDTHH in UTC"),
        (("produce", *ENV, "--source", dev_env.SOURCE, "--file", __file__, "--unsent-file", "left.txt"),
         "--unsent-file 'left.txt': must end in .jsonl (it is replayed with --dead-letters)"),
        (("produce", *ENV, "--source", dev_env.SOURCE, "--dead-letters", __file__),
         f"--dead-letters {__file__!r}: not a dead-letter file name; expected .parquet, .jsonl"),
        (("produce", *ENV, "--source", dev_env.SOURCE, "--dead-letters", str(tmp_path)),
         f"--dead-letters {str(tmp_path)!r}: no Parquet or JSON Lines files under that folder"),
    ]
    for args, message in checks:
        result = deployed.cli(*args)
        assert (result.returncode, message) == (1, message) and f"error: {message}" in result.stderr, result.stderr


def test_a_missing_stack_output_is_named(deployed):
    outputs = {k: v for k, v in dev_env.OUTPUTS.items() if k != "CompactionJobName"}
    deployed.client("cloudformation").delete_stack(StackName=dev_env.STACK)
    deployed.client("cloudformation").create_stack(StackName=dev_env.STACK, TemplateBody=json.dumps({
        "Resources": {"Placeholder": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {k: {"Value": v} for k, v in outputs.items()}}))

    result = deployed.cli("compact", *ENV, "--hour", "2024-05-01T13")

    assert result.returncode == 1
    assert "error: stack 'streamlake-dev' has no output 'CompactionJobName'" in result.stderr


def test_schema_evolve_refuses_an_incompatible_schema(deployed, tmp_path):
    _start_running_job(deployed)
    schema = tmp_path / "event.avsc"
    schema.write_text(json.dumps(dev_env.schema_with([{"name": "country", "type": "string"}])))

    result = deployed.cli("schema-evolve", *ENV, "--dataset", "clickstream", "--schema-file", str(schema), "--yes")

    assert result.returncode == 1
    assert "1. check compatibility (BACKWARD) against versions 1 (latest) and 1 (checkpoint), and the lake's rules: REFUSED" in result.stdout
    assert "Event.country: field added without a default" in result.stdout
    assert ("error: the new schema is refused (registry BACKWARD compatibility or the lake's rules); nothing was changed"
            in result.stderr)
    glue = deployed.client("glue")
    assert glue.get_schema(SchemaId=SCHEMA_ID)["LatestSchemaVersion"] == 1
    assert [r["JobRunState"] for r in glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]


def test_schema_evolve_before_the_deploy_says_what_to_commit_and_changes_nothing(deployed, tmp_path):
    run_id = _start_running_job(deployed)
    schema = tmp_path / "event.avsc"
    schema.write_text(json.dumps(dev_env.schema_with([{"name": "country", "type": ["null", "string"], "default": None}])))
    glue = deployed.client("glue")

    result = deployed.cli("schema-evolve", *ENV, "--dataset", "clickstream", "--schema-file", str(schema), "--yes")

    assert result.returncode == 0, result.stderr
    assert "Commit the file as datasets/clickstream/schema.v2.avsc, review `make diff`" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "nothing changed: commit the file as datasets/clickstream/schema.v2.avsc, pin its digest in "
        "datasets/clickstream/schemas.lock.json (`streamlake dataset check clickstream` prints the line), deploy, "
        "then run this command again")
    assert glue.get_schema(SchemaId=SCHEMA_ID)["LatestSchemaVersion"] == 1
    assert [(r["Id"], r["JobRunState"]) for r in glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == [
        (run_id, "RUNNING")]


def test_schema_evolve_needs_the_dataset_where_the_environment_binds_several(deployed):
    result = deployed.cli("schema-evolve", *ENV, "--dry-run")
    assert result.returncode == 1
    assert "error: --dataset is required: environment 'dev' binds 4 datasets (checkouts, clickstream, orders, page_views)" in result.stderr


def test_schema_evolve_with_the_deployed_committed_schema_restarts_the_jobs(deployed):
    """The committed newest version is what the registry holds (the dev env registers it): the tool's default
    file, a dry run, then the restart."""
    run_id = _start_running_job(deployed)
    # Then the deploy changed the job (its --dataset_digest), and its deploy step did not restart the run.
    dev_env.job_definition_changed(dev_env.STREAMING_JOB)
    dry = deployed.cli("schema-evolve", *ENV, "--dataset", "clickstream", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "2. deploy - done: registry version 1 is the file" in dry.stdout
    assert f"4. restart streaming jobs: {dev_env.STREAMING_JOB} (run {run_id})" in dry.stdout
    glue = deployed.client("glue")
    assert [r["JobRunState"] for r in glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]

    unconfirmed = deployed.cli("schema-evolve", *ENV, "--dataset", "clickstream")
    assert unconfirmed.returncode == 1 and "confirmation needed" in unconfirmed.stderr

    real = deployed.cli("schema-evolve", *ENV, "--dataset", "clickstream", "--yes")
    assert real.returncode == 0, real.stderr
    lines = real.stdout.splitlines()
    assert lines[-3] == f"4. stopped {dev_env.STREAMING_JOB} (run {run_id}: STOPPED)"
    assert lines[-2].startswith(f"4. restarted {dev_env.STREAMING_JOB}: run jr_")
    assert lines[-1] == "5. now roll out producers writing the new schema"


def test_job_start_status_stop(deployed):
    started = deployed.cli("job", "start", *ENV, "--source", dev_env.SOURCE)
    assert started.returncode == 0, started.stderr
    first, keeper_line = started.stdout.splitlines()
    run_id = first.split("run ")[-1].strip()
    assert first == f"started {dev_env.STREAMING_JOB}: run {run_id}" and keeper_line.startswith("hold released")
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)

    status = deployed.cli("job", "status", *ENV, "--source", dev_env.SOURCE)
    assert status.returncode == 0 and f"current run:  {run_id} RUNNING since" in status.stdout

    glue = deployed.client("glue")
    arn = f"arn:aws:glue:{dev_env.REGION}:{dev_env.ACCOUNT}:job/{dev_env.STREAMING_JOB}"
    assert "streamlake:hold" not in glue.get_tags(ResourceArn=arn)["Tags"]
    stopped = deployed.cli("job", "stop", *ENV, "--source", dev_env.SOURCE, "--yes")  # dev's job runs orders too
    assert (stopped.returncode, stopped.stdout.splitlines()[-1]) == (0, f"stopped {dev_env.STREAMING_JOB} run {run_id}: STOPPED")
    # Held: the job keeper (infra/functions/job_keeper) leaves a job stopped this way alone until `job start`.
    assert glue.get_tags(ResourceArn=arn)["Tags"]["streamlake:hold"].startswith("job stop since ")
    assert deployed.cli("job", "start", *ENV, "--source", dev_env.SOURCE).returncode == 0
    assert "streamlake:hold" not in glue.get_tags(ResourceArn=arn)["Tags"]


def test_checkpoint_reset_needs_confirmation_and_a_stopped_job(deployed):
    s3 = deployed.client("s3")
    s3.put_object(Bucket=dev_env.CHECKPOINT_BUCKET, Key="checkpoints/clickstream/commits/0", Body=b"v1")
    _start_running_job(deployed)

    running = deployed.cli("job", "reset-checkpoint", *ENV, "--source", dev_env.SOURCE, "--yes")
    assert running.returncode == 1 and "is RUNNING" in running.stderr

    deployed.client("glue").batch_stop_job_run(
        JobName=dev_env.STREAMING_JOB,
        JobRunIds=[r["Id"] for r in deployed.client("glue").get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]])
    unconfirmed = deployed.cli("job", "reset-checkpoint", *ENV, "--source", dev_env.SOURCE)
    assert unconfirmed.returncode == 1 and "confirmation needed" in unconfirmed.stderr
    assert s3.list_objects_v2(Bucket=dev_env.CHECKPOINT_BUCKET)["KeyCount"] == 1

    confirmed = deployed.cli("job", "reset-checkpoint", *ENV, "--source", dev_env.SOURCE, "--yes")
    assert confirmed.returncode == 0, confirmed.stderr
    assert f"deleted 1 object(s) from {dev_env.CHECKPOINT_PATH}" in confirmed.stdout
    assert s3.list_objects_v2(Bucket=dev_env.CHECKPOINT_BUCKET)["KeyCount"] == 0


def test_compact_starts_the_compaction_job_with_the_hour(deployed):
    result = deployed.cli("compact", *ENV, "--hour", "2024-05-01T13")

    assert result.returncode == 0, result.stderr
    run_id = result.stdout.split("run ")[-1].strip()
    run = deployed.client("glue").get_job_run(JobName=dev_env.COMPACTION_JOB, RunId=run_id)["JobRun"]
    assert run["Arguments"] == {"--hour": "2024-05-01T13"}


def test_compact_scan_starts_the_compaction_job_over_its_lookback_window(deployed):
    result = deployed.cli("compact", *ENV, "--scan")

    assert result.returncode == 0, result.stderr
    assert "for the lookback window (--scan)" in result.stdout
    run_id = result.stdout.split("run ")[-1].strip()
    run = deployed.client("glue").get_job_run(JobName=dev_env.COMPACTION_JOB, RunId=run_id)["JobRun"]
    assert run["Arguments"] == {"--scan": "true"}
    both = deployed.cli("compact", *ENV, "--scan", "--hour", "2024-05-01T13")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_the_sources_of_a_shared_job_stop_together_and_report_each_its_last_batch(deployed, tmp_path):
    """dev as shipped, clickstream, orders and the routed events in one job (config `streaming_jobs` "ingest"): `job
    status` of any names every source and each one's last committed batch (a routed source's: the last every part
    committed); `job stop` of one says the others stop with it and asks first; a checkpoint reset is the one source's,
    and says the others keep their own."""
    from infra.config import DEFAULT_CONFIG_PATH, update_raw

    shared = ENV
    config = tmp_path / "environments.json"
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    config.write_text(json.dumps(update_raw(raw, "dev", "streaming_jobs", [])))
    s3 = deployed.client("s3")
    for key in ("checkpoints/orders/_streamlake/batch-0000000006.committed.json",
                "checkpoints/orders/_streamlake/batch-0000000012.committed.json", "checkpoints/orders/offsets/12"):
        s3.put_object(Bucket=dev_env.CHECKPOINT_BUCKET, Key=key, Body=b"{}")
    # batch 4: checkouts not yet; sensor_readings was taken out of the route after batch 1 and holds nothing up
    routed = [("page_views", (3, 4)), ("checkouts", (3,)), ("_unroutable", (2, 3, 4)), ("sensor_readings", (1,))]
    for part, batches in routed:
        for batch in batches:
            s3.put_object(Bucket=dev_env.CHECKPOINT_BUCKET, Body=b"{}",
                          Key=f"checkpoints/events/_routes/{part}/_streamlake/batch-{batch:010d}.committed.json")

    started = deployed.cli("job", "start", *shared, "--source", "orders")
    assert started.returncode == 0 and started.stdout.startswith(f"started {dev_env.STREAMING_JOB}: run "), started.stderr
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)
    status = deployed.cli("job", "status", *shared, "--source", "clickstream")
    assert status.returncode == 0, status.stderr
    assert "sources:      clickstream, orders, events (one job: they start and stop together)" in status.stdout
    assert "  clickstream: no committed batch yet" in status.stdout
    assert "  orders: last committed batch 12 at " in status.stdout
    assert re.search(r"^  events: last committed batch 3 at \S+ \(by each of its 3 parts\)$", status.stdout, re.M), status.stdout

    unconfirmed = deployed.cli("job", "stop", *shared, "--source", "orders")
    assert unconfirmed.returncode == 1 and "confirmation needed" in unconfirmed.stderr
    assert f"{dev_env.STREAMING_JOB} runs sources clickstream, orders, events: stopping it stops and holds clickstream, events too" in unconfirmed.stdout
    glue = deployed.client("glue")
    assert [r["JobRunState"] for r in glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]
    stopped = deployed.cli("job", "stop", *shared, "--source", "orders", "--yes")
    assert stopped.returncode == 0 and stopped.stdout.splitlines()[-1].endswith(": STOPPED"), stopped.stderr

    reset = deployed.cli("job", "reset-checkpoint", *shared, "--source", "orders", "--yes")
    assert reset.returncode == 0, reset.stderr
    assert "the job's other sources (clickstream, events) keep their checkpoints" in reset.stdout
    kept = sorted(f"checkpoints/events/_routes/{part}/_streamlake/batch-{batch:010d}.committed.json"
                  for part, batches in routed for batch in batches)  # orders' gone, the other sources' kept
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=dev_env.CHECKPOINT_BUCKET).get("Contents", [])] == kept
    alone = deployed.cli("job", "status", *ENV, "--config", str(config), "--source", "clickstream")  # a job of its own
    assert "sources:      clickstream\n" in alone.stdout and "one job" not in alone.stdout
