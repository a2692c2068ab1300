"""Schema evolution against in-process moto: order of calls, dry run, refusals, table contents."""

from __future__ import annotations

import json

import pytest

from glue_jobs import schema as event_schema
from tests.ops import moto_dev_env as dev_env
from tools import avro_compat, schema_evolution
from tools.errors import ToolError

TARGETS = schema_evolution.Targets(
    registry=dev_env.REGISTRY, schema_name=dev_env.SCHEMA, database=dev_env.DATABASE,
    source_tables={dev_env.SOURCE: dev_env.SOURCE_TABLE}, lake_table=dev_env.LAKE_TABLE,
    streaming_jobs={dev_env.SOURCE: dev_env.STREAMING_JOB},
)
COUNTRY = {"name": "country", "type": ["null", "string"], "default": None, "doc": "ISO 3166 code"}
READ_ONLY = {"GetSchema", "GetSchemaVersion", "GetTable", "GetJobRuns", "GetJobRun"}


def _schema_file(tmp_path, schema: dict) -> str:
    path = tmp_path / "event.avsc"
    path.write_text(json.dumps(schema, indent=2))
    return str(path)


def _record_calls(client) -> list[str]:
    calls: list[str] = []
    client.meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    return calls


def _running_job(aws) -> str:
    run_id = aws.glue.start_job_run(JobName=dev_env.STREAMING_JOB)["JobRunId"]
    dev_env.mark_runs_running(dev_env.STREAMING_JOB)
    return run_id


def _columns(aws, table: str) -> list[tuple[str, str]]:
    t = aws.glue.get_table(DatabaseName=dev_env.DATABASE, Name=table)["Table"]
    return [(c["Name"], c["Type"]) for c in t["StorageDescriptor"]["Columns"]]


def test_columns_from_the_schema_file_match_glue_jobs_schema():
    parsed = avro_compat.parse(event_schema.avro_schema_definition())
    assert [(n, t) for n, t, _ in schema_evolution.source_columns(parsed, "x")] == event_schema.source_columns()
    assert [(n, t) for n, t, _ in schema_evolution.lake_columns(parsed, "x")] == event_schema.lake_columns()


def test_unsupported_types_are_refused_naming_the_field(tmp_path):
    bad = _schema_file(tmp_path, dev_env.schema_with([{"name": "tags", "type": {"type": "array", "items": "string"}}]))
    with pytest.raises(ToolError, match=r"field 'tags': Avro type .* is not supported by the lake"):
        schema_evolution.build_plan(None, TARGETS, bad)


@pytest.fixture
def committed(tmp_path, monkeypatch):
    """Commit schema versions for the test: glue_jobs.schema reads them from a temporary folder."""
    def commit(*schemas: dict) -> None:
        folder = tmp_path / "committed"
        folder.mkdir(exist_ok=True)
        for number, definition in enumerate((json.loads(event_schema.schema_text(1)), *schemas), start=1):
            (folder / f"event.v{number}.avsc").write_text(json.dumps(definition), encoding="utf-8")
        monkeypatch.setattr(event_schema, "schema_folder", lambda: folder)
        for cached in (event_schema.schema_versions, event_schema.avro_schema):
            cached.cache_clear()

    yield commit
    for cached in (event_schema.schema_versions, event_schema.avro_schema):
        cached.cache_clear()


def _deploy(aws, schema: dict, *, tables: bool = True) -> None:
    """What the stack's deploy does with a new committed version (infra/catalog.py): AWS::Glue::SchemaVersion
    registers it, and the tables' columns follow the file (the MSK table's pin, in the pin test)."""
    aws.glue.register_schema_version(SchemaId={"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA},
                                     SchemaDefinition=json.dumps(schema, separators=(",", ":")))
    if not tables:
        return
    parsed = avro_compat.parse(schema)
    for table, columns in ((dev_env.SOURCE_TABLE, schema_evolution.source_columns(parsed, "x")),
                           (dev_env.LAKE_TABLE, schema_evolution.lake_columns(parsed, "x"))):
        current = aws.glue.get_table(DatabaseName=dev_env.DATABASE, Name=table)["Table"]
        table_input = {k: current[k] for k in ("Name", "TableType", "Parameters", "PartitionKeys", "StorageDescriptor")
                       if k in current}
        table_input["StorageDescriptor"] = {**current["StorageDescriptor"],
                                            "Columns": [{"Name": n, "Type": t} for n, t, _ in columns]}
        aws.glue.update_table(DatabaseName=dev_env.DATABASE, TableInput=table_input)


def test_before_the_deploy_it_says_what_to_commit_and_changes_nothing(aws, tmp_path):
    run_id = _running_job(aws)
    calls = _record_calls(aws.glue)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([COUNTRY])))
    said: list[str] = []
    schema_evolution.execute(aws.glue, plan, say=said.append, sleep=lambda s: None)

    assert set(calls) <= READ_ONLY
    assert plan.lines() == [
        f"schema {dev_env.REGISTRY}/{dev_env.SCHEMA} (compatibility BACKWARD, latest version 1, checkpoint version 1)",
        "1. check compatibility (BACKWARD) against versions 1 (latest) and 1 (checkpoint): ok",
        "2. deploy: not in the registry yet. Commit the file as glue_jobs/schemas/event.v2.avsc, review `make diff` "
        "(a schema version added, no replacement), deploy (`npx cdk deploy '<env>/*'`), then run this command again "
        "to restart the jobs",
    ]
    assert said == ["nothing changed: commit the file as glue_jobs/schemas/event.v2.avsc and deploy first (step 2 above)"]
    assert [(r["Id"], r["JobRunState"]) for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == [
        (run_id, "RUNNING")]


def test_after_the_deploy_it_restarts_the_running_jobs_then_names_producers(aws, tmp_path, committed):
    old_run = _running_job(aws)
    evolved = dev_env.schema_with([COUNTRY])
    committed(evolved)
    _deploy(aws, evolved)
    calls = _record_calls(aws.glue)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, evolved))
    assert plan.lines()[1:] == [
        "1. check compatibility (BACKWARD) against versions 2 (latest) and 1 (checkpoint): ok",
        "2. deploy - done: registry version 2 is the file",
        "3. verify the catalog tables follow it: ok",
        f"4. restart streaming jobs: {dev_env.STREAMING_JOB} (run {old_run})",
        "5. then roll out producers writing the new schema (outside this tool)",
    ]
    said: list[str] = []
    schema_evolution.execute(aws.glue, plan, say=said.append, sleep=lambda s: None)

    assert [c for c in calls if c not in READ_ONLY] == ["BatchStopJobRun", "StartJobRun"]
    assert said[0] == f"4. stopped {dev_env.STREAMING_JOB} (run {old_run}: STOPPED)"
    assert said[-1] == "5. now roll out producers writing the new schema"
    runs = {r["Id"]: r["JobRunState"] for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]}
    assert runs.pop(old_run) == "STOPPED"
    assert list(runs.values()) == ["STARTING"]  # the restarted run


def test_a_deploy_that_left_a_table_behind_is_drift_and_nothing_restarts(aws, tmp_path, committed):
    _running_job(aws)
    evolved = dev_env.schema_with([COUNTRY])
    committed(evolved)
    _deploy(aws, evolved, tables=False)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, evolved))
    assert f"     {dev_env.DATABASE}.{dev_env.SOURCE_TABLE} columns do not match the file: the deploy has not updated it (re-deploy)" in plan.lines()
    with pytest.raises(ToolError, match="the deployed catalog does not follow the schema; nothing was changed"):
        schema_evolution.execute(aws.glue, plan, say=lambda s: None)
    assert [r["JobRunState"] for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]


def test_incompatible_change_is_refused_before_anything_changes(aws, tmp_path):
    _running_job(aws)
    calls = _record_calls(aws.glue)
    required = {"name": "country", "type": "string"}
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([required])))

    with pytest.raises(ToolError, match="not BACKWARD-compatible .* nothing was changed:\n  BACKWARD vs version 1: "
                                        "Event.country: field added without a default"):
        schema_evolution.execute(aws.glue, plan, say=lambda s: None)
    assert set(calls) <= READ_ONLY
    assert [r["JobRunState"] for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]


def test_the_checkpoint_version_is_checked_as_well_as_the_latest(aws, tmp_path):
    """v2 adds `country` with a default, v3 drops the default: fine against v2, not against v1 (the checkpoint)."""
    with_default = dev_env.schema_with([{"name": "country", "type": "string", "default": "none"}])
    _deploy(aws, with_default)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([
        {"name": "country", "type": "string"}])))
    assert [p.split(",")[0] for p in plan.problems] == [
        "BACKWARD vs version 1 (checkpoint): Event.country: field added without a default"]


def test_a_registry_backed_table_is_checked_by_its_pin_not_its_columns(aws, tmp_path, committed):
    """GetTable on AWS returns a registry-backed table's SchemaReference AND the Columns Glue derived from it
    (Glue developer guide, Schema Registry integrations, "AWS Glue Data Catalog"); moto returns no columns, so
    the AWS-shaped response is built here. The pin decides."""
    aws.glue.create_table(DatabaseName=dev_env.DATABASE, TableInput={
        "Name": "source_orders", "Parameters": {"typeOfData": "kafka"},
        "StorageDescriptor": {"Columns": [], "Location": "orders-events", "SchemaReference": {
            "SchemaId": {"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA},
            "SchemaVersionNumber": 1}},
    })
    real_get_table = aws.glue.get_table

    def aws_shaped(**kwargs):
        table = real_get_table(**kwargs)
        if kwargs["Name"] == "source_orders":
            table["Table"]["StorageDescriptor"]["Columns"] = [{"Name": n, "Type": t} for n, t in event_schema.source_columns()]
        return table

    aws.glue.get_table = aws_shaped
    evolved = dev_env.schema_with([COUNTRY])
    committed(evolved)
    _deploy(aws, evolved)
    targets = schema_evolution.Targets(**{**TARGETS.__dict__, "source_tables": {"orders": "source_orders"}})
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, evolved))
    assert plan.drift == [f"{dev_env.DATABASE}.source_orders is pinned to schema version 1, not 2: the deploy has not "
                          "updated it (re-deploy)"]


def test_a_deployed_file_that_is_not_the_newest_committed_version_is_drift(aws, tmp_path):
    """Deployed from another checkout: the registry has it, this tree does not commit it as its newest file."""
    evolved = dev_env.schema_with([COUNTRY])
    _deploy(aws, evolved)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, evolved))
    assert plan.drift == ["the deployed file is not committed in this checkout (it would be "
                          "glue_jobs/schemas/event.v2.avsc): run the tool from the checkout that was deployed"]
