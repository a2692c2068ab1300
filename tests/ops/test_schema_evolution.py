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


def test_compatible_change_registers_stops_updates_restarts_in_that_order(aws, tmp_path):
    old_run = _running_job(aws)
    calls = _record_calls(aws.glue)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([COUNTRY])))
    said: list[str] = []
    schema_evolution.execute(aws.glue, plan, say=said.append, sleep=lambda s: None)

    mutating = [c for c in calls if c not in READ_ONLY]
    assert mutating == ["RegisterSchemaVersion", "BatchStopJobRun", "UpdateTable", "UpdateTable", "StartJobRun"]
    assert said[0] == f"2. registered {dev_env.REGISTRY}/{dev_env.SCHEMA} version 2"
    assert said[-1] == "6. now roll out producers writing the new schema"

    latest = aws.glue.get_schema_version(SchemaId={"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA},
                                         SchemaVersionNumber={"LatestVersion": True})
    assert (latest["VersionNumber"], json.loads(latest["SchemaDefinition"])) == (2, dev_env.schema_with([COUNTRY]))
    assert _columns(aws, dev_env.SOURCE_TABLE) == event_schema.source_columns() + [("country", "string")]
    lake = aws.glue.get_table(DatabaseName=dev_env.DATABASE, Name=dev_env.LAKE_TABLE)["Table"]
    contract = [c for c in event_schema.lake_columns() if c[0] not in {n for n, _, _ in event_schema.INGESTION_COLUMNS}]
    ingestion = [(n, t) for n, t, _ in event_schema.INGESTION_COLUMNS]
    assert [(c["Name"], c["Type"]) for c in lake["StorageDescriptor"]["Columns"]] == (
        contract + [("country", "string")] + ingestion)
    assert lake["StorageDescriptor"]["Columns"][len(contract)]["Comment"] == "ISO 3166 code"
    # Partition keys, parameters, location and SerDe survive the update.
    assert [(p["Name"], p["Type"]) for p in lake["PartitionKeys"]] == event_schema.lake_partition_columns()
    assert lake["Parameters"] == {"classification": "parquet", "projection.enabled": "true"}
    assert lake["StorageDescriptor"]["Location"] == f"s3://{dev_env.LAKE_BUCKET}/events/"

    runs = {r["Id"]: r["JobRunState"] for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]}
    assert runs.pop(old_run) == "STOPPED"
    assert list(runs.values()) == ["STARTING"]  # the restarted run

    again = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([COUNTRY])))
    assert (again.register, again.table_updates) == (False, [])  # re-running is a no-op


def test_dry_run_plan_calls_no_mutating_api_and_shows_every_step(aws, tmp_path):
    run_id = _running_job(aws)
    calls = _record_calls(aws.glue)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([COUNTRY])))

    assert set(calls) <= READ_ONLY
    assert plan.lines() == [
        f"schema {dev_env.REGISTRY}/{dev_env.SCHEMA} (compatibility BACKWARD, latest version 1)",
        "1. check compatibility (BACKWARD) against the registry: ok",
        "2. register schema version 2",
        f"3. stop streaming jobs: {dev_env.STREAMING_JOB} (run {run_id})",
        "4. update catalog tables:",
        f"     {dev_env.DATABASE}.{dev_env.SOURCE_TABLE}: + country string",
        f"     {dev_env.DATABASE}.{dev_env.LAKE_TABLE}: + country string",
        f"5. restart streaming jobs: {dev_env.STREAMING_JOB}",
        "6. then roll out producers writing the new schema (outside this tool)",
    ]


def test_incompatible_change_is_refused_before_anything_changes(aws, tmp_path):
    _running_job(aws)
    calls = _record_calls(aws.glue)
    required = {"name": "country", "type": "string"}
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([required])))

    with pytest.raises(ToolError, match="not BACKWARD-compatible .* nothing was changed:\n  BACKWARD vs version 1: "
                                        "Event.country: field added without a default"):
        schema_evolution.execute(aws.glue, plan, say=lambda s: None)
    assert set(calls) <= READ_ONLY
    assert aws.glue.get_schema(SchemaId={"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA})[
        "LatestSchemaVersion"] == 1
    assert _columns(aws, dev_env.SOURCE_TABLE) == event_schema.source_columns()
    assert [r["JobRunState"] for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]


def test_a_failure_status_from_the_registry_stops_the_procedure(aws, tmp_path):
    """The registry's own verdict (what AWS returns for an incompatible version) after a PENDING."""
    _running_job(aws)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([COUNTRY])))
    real_register = aws.glue.register_schema_version
    aws.glue.register_schema_version = lambda **kw: {**real_register(**kw), "Status": "PENDING"}
    aws.glue.get_schema_version = lambda **kw: {"Status": "FAILURE"}
    calls = _record_calls(aws.glue)

    with pytest.raises(ToolError, match="registry marked version 2 FAILURE: not BACKWARD-compatible .* Nothing else"):
        schema_evolution.execute(aws.glue, plan, say=lambda s: None, sleep=lambda s: None)
    assert [c for c in calls if c not in READ_ONLY] == ["RegisterSchemaVersion"]  # no stop, no table update
    assert _columns(aws, dev_env.SOURCE_TABLE) == event_schema.source_columns()


def test_registry_backed_table_moves_its_pinned_version(aws, tmp_path):
    aws.glue.create_table(DatabaseName=dev_env.DATABASE, TableInput={
        "Name": "source_orders", "Parameters": {"typeOfData": "kafka"},
        "StorageDescriptor": {"Columns": [], "Location": "orders-events", "SchemaReference": {
            "SchemaId": {"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA},
            "SchemaVersionNumber": 1}},
    })
    targets = schema_evolution.Targets(**{**TARGETS.__dict__, "source_tables": {"orders": "source_orders"}})
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, dev_env.schema_with([COUNTRY])))
    assert f"     {dev_env.DATABASE}.source_orders: schema version 1 -> 2" in plan.lines()

    schema_evolution.execute(aws.glue, plan, say=lambda s: None, sleep=lambda s: None)
    descriptor = aws.glue.get_table(DatabaseName=dev_env.DATABASE, Name="source_orders")["Table"]["StorageDescriptor"]
    assert descriptor.get("Columns", []) == []
    assert descriptor["SchemaReference"]["SchemaVersionNumber"] == 2
