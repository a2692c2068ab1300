"""Schema evolution against in-process moto: order of calls, dry run, refusals, table contents, per dataset."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil

import pytest

from glue_jobs import datasets
from glue_jobs import schema as event_schema
from operations import schema_evolution
from operations.errors import ToolError
from tests.ops import moto_dev_env as dev_env

TARGETS = schema_evolution.Targets(
    dataset=datasets.load("clickstream"),
    registry=dev_env.REGISTRY, schema_name=dev_env.SCHEMA, database=dev_env.DATABASE,
    source_tables={dev_env.SOURCE: dev_env.SOURCE_TABLE}, lake_table=dev_env.LAKE_TABLE,
    streaming_jobs={dev_env.SOURCE: dev_env.STREAMING_JOB},
)
COUNTRY = {"name": "country", "type": ["null", "string"], "default": None, "doc": "ISO 3166 code"}
READ_ONLY = {"GetSchema", "GetSchemaVersion", "GetTable", "GetJob", "GetJobRuns", "GetJobRun"}


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


def _columns_of(schema: dict, dataset: str = "clickstream") -> tuple[list, list]:
    found = datasets.load(dataset)
    node = schema_evolution.schema_node(found, schema, "x")
    return schema_evolution.source_columns(found, node), schema_evolution.lake_columns(found, node)


def test_columns_from_the_schema_file_are_what_the_stack_derives():
    source, lake = _columns_of(json.loads(event_schema.avro_schema_definition()))
    assert source == event_schema.source_columns() and lake == event_schema.lake_columns()
    source, lake = _columns_of(datasets.load("orders").avro(), "orders")
    assert ("items", "array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>") in lake


def test_a_type_the_lake_cannot_store_is_refused_naming_the_field(tmp_path):
    bad = _schema_file(tmp_path, dev_env.schema_with([{"name": "tags", "type": ["string", "int"]}]))
    with pytest.raises(ToolError, match=r"tags: a union must be \['null', T\], got \['string', 'int'\] \(dataset clickstream\)"):
        schema_evolution.build_plan(None, TARGETS, bad)


@pytest.fixture
def committed(tmp_path, monkeypatch):
    """Commit schema versions of a dataset for the test: a copy of datasets/ (STREAMLAKE_DATASETS) with the
    versions added and pinned, as an operator commits them. Returns the dataset as the tool loads it."""
    def commit(*schemas: dict, dataset: str = "clickstream") -> datasets.Dataset:
        root = tmp_path / "datasets"
        if not root.exists():
            shutil.copytree(datasets.root(), root)
        folder = root / dataset
        lock = json.loads((folder / "schemas.lock.json").read_text())
        first = len(lock) + 1
        for number, definition in enumerate(schemas, start=first):
            text = json.dumps(definition).encode()
            (folder / f"schema.v{number}.avsc").write_bytes(text)
            lock[f"schema.v{number}.avsc"] = hashlib.sha256(text).hexdigest()
        (folder / "schemas.lock.json").write_text(json.dumps(lock))
        monkeypatch.setenv(datasets.ROOT_VARIABLE, str(root))
        return datasets.load(dataset)

    return commit


def _deploy(aws, schema: dict, *, tables: bool = True) -> None:
    """What the stack's deploy does with a new committed version (infra/catalog.py): AWS::Glue::SchemaVersion
    registers it, and the tables' columns follow the file (the MSK table's pin, in the pin test)."""
    aws.glue.register_schema_version(SchemaId={"RegistryName": dev_env.REGISTRY, "SchemaName": dev_env.SCHEMA},
                                     SchemaDefinition=json.dumps(schema, separators=(",", ":")))
    dev_env.job_definition_changed(dev_env.STREAMING_JOB)
    if not tables:
        return
    source, lake = _columns_of(schema)
    for table, columns in ((dev_env.SOURCE_TABLE, source), (dev_env.LAKE_TABLE, lake)):
        current = aws.glue.get_table(DatabaseName=dev_env.DATABASE, Name=table)["Table"]
        table_input = {k: current[k] for k in ("Name", "TableType", "Parameters", "PartitionKeys", "StorageDescriptor")
                       if k in current}
        table_input["StorageDescriptor"] = {**current["StorageDescriptor"],
                                            "Columns": [{"Name": n, "Type": t} for n, t in columns]}
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
        "1. check compatibility (BACKWARD) against versions 1 (latest) and 1 (checkpoint), and the lake's rules: ok",
        "2. deploy: not in the registry yet. Commit the file as datasets/clickstream/schema.v2.avsc, review `make diff` "
        "(a schema version added, no replacement), deploy (`npx cdk deploy '<env>/*'`), then run this command again "
        "to restart the jobs",
    ]
    assert said == ["nothing changed: commit the file as datasets/clickstream/schema.v2.avsc and deploy first (step 2 above)"]
    assert [(r["Id"], r["JobRunState"]) for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == [
        (run_id, "RUNNING")]


def test_a_run_the_deploy_already_restarted_is_left_running(aws, tmp_path, committed):
    """The deploy changed the job's --dataset_digest, so the job keeper's deploy step restarted the run on the new
    code (infra/job_keeper.py): schema-evolve has nothing left to restart."""
    evolved = dev_env.schema_with([COUNTRY])
    targets = dataclasses.replace(TARGETS, dataset=committed(evolved))
    _deploy(aws, evolved)
    new_run = _running_job(aws)  # started after the job definition changed
    calls = _record_calls(aws.glue)
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, evolved))
    assert plan.lines()[4:6] == [
        "4. restart streaming jobs: - none running older code",
        f"     already restarted by the deploy (the job keeper's deploy step), left running: {dev_env.STREAMING_JOB} "
        f"(run {new_run})",
    ]
    schema_evolution.execute(aws.glue, plan, say=lambda line: None, sleep=lambda s: None)
    assert [c for c in calls if c not in READ_ONLY] == []


def test_after_the_deploy_it_restarts_the_running_jobs_then_names_producers(aws, tmp_path, committed):
    old_run = _running_job(aws)
    evolved = dev_env.schema_with([COUNTRY])
    targets = dataclasses.replace(TARGETS, dataset=committed(evolved))
    _deploy(aws, evolved)
    calls = _record_calls(aws.glue)
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, evolved))
    assert plan.lines()[1:] == [
        "1. check compatibility (BACKWARD) against versions 2 (latest) and 1 (checkpoint), and the lake's rules: ok",
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
    targets = dataclasses.replace(TARGETS, dataset=committed(evolved))
    _deploy(aws, evolved, tables=False)
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, evolved))
    assert f"     {dev_env.DATABASE}.{dev_env.SOURCE_TABLE} columns do not match the file: the deploy has not updated it (re-deploy)" in plan.lines()
    with pytest.raises(ToolError, match="the deployed catalog does not follow the schema; nothing was changed"):
        schema_evolution.execute(aws.glue, plan, say=lambda s: None)
    assert [r["JobRunState"] for r in aws.glue.get_job_runs(JobName=dev_env.STREAMING_JOB)["JobRuns"]] == ["RUNNING"]


def test_incompatible_change_is_refused_before_anything_changes(aws, tmp_path):
    _running_job(aws)
    calls = _record_calls(aws.glue)
    required = {"name": "country", "type": "string"}
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, dev_env.schema_with([required])))

    with pytest.raises(ToolError, match="refused .* nothing was changed:\n  BACKWARD vs version 1: "
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


def test_a_deployed_file_that_is_not_the_newest_committed_version_is_drift(aws, tmp_path):
    """Deployed from another checkout: the registry has it, this tree does not commit it as its newest file."""
    evolved = dev_env.schema_with([COUNTRY])
    _deploy(aws, evolved)
    plan = schema_evolution.build_plan(aws.glue, TARGETS, _schema_file(tmp_path, evolved))
    assert plan.drift == ["the deployed file is not committed in this checkout (it would be "
                          "datasets/clickstream/schema.v2.avsc): run the tool from the checkout that was deployed"]


def _orders_registered(aws) -> schema_evolution.Targets:
    """The orders dataset's registry schema as the stack creates it (infra/catalog.py: version 1 from the file)."""
    orders = datasets.load("orders")
    aws.glue.create_schema(RegistryId={"RegistryName": dev_env.REGISTRY}, SchemaName=orders.avro_full_name,
                           DataFormat="AVRO", Compatibility="BACKWARD", SchemaDefinition=orders.registry_definition(1))
    return schema_evolution.Targets(dataset=orders, registry=dev_env.REGISTRY, schema_name=orders.avro_full_name,
                                    database=dev_env.DATABASE, source_tables={}, lake_table="orders", streaming_jobs={})


def _orders_with(change) -> dict:
    schema = datasets.load("orders").avro()
    change(schema)
    return schema


def _item_fields(schema: dict) -> list[dict]:
    return next(f for f in schema["fields"] if f["name"] == "items")["type"]["items"]["fields"]


def test_a_nested_decimal_change_is_refused_by_the_lake_rule_the_registry_would_accept(aws, tmp_path):
    """unit_price decimal(10,2) -> (10,3) is BACKWARD-compatible for Avro readers, but Parquet files keep
    decimal(10,2): the lake's keep-decimal rule refuses it, naming the path."""
    targets = _orders_registered(aws)
    rescaled = _orders_with(lambda s: next(f for f in _item_fields(s) if f["name"] == "unit_price")["type"].update(scale=3))
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, rescaled))
    assert plan.problems == ["lake rules vs version 1: items[].unit_price: decimal(10,2) -> decimal(10,3) (rule: keep-decimal)"]
    assert plan.lines()[1].endswith("and the lake's rules: REFUSED")
    with pytest.raises(ToolError, match="nothing was changed"):
        schema_evolution.execute(aws.glue, plan, say=lambda s: None)


def test_an_optional_field_added_inside_the_line_items_of_orders_goes_to_deploy(aws, tmp_path):
    targets = _orders_registered(aws)
    gift = {"name": "gift_wrap", "type": ["null", "boolean"], "default": None}
    evolved = _orders_with(lambda s: _item_fields(s).append(gift))
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, evolved))
    assert plan.problems == [] and not plan.deployed
    assert plan.next_file == "datasets/orders/schema.v2.avsc"
    _, lake = _columns_of(evolved, "orders")
    assert ("items", "array<struct<sku:string,quantity:int,unit_price:decimal(10,2),gift_wrap:boolean>>") in lake


def test_a_required_field_added_to_orders_is_refused_by_both_checks(aws, tmp_path):
    targets = _orders_registered(aws)
    evolved = _orders_with(lambda s: s["fields"].append({"name": "channel", "type": "string"}))
    plan = schema_evolution.build_plan(aws.glue, targets, _schema_file(tmp_path, evolved))
    assert [p.split(":")[0] for p in plan.problems] == ["BACKWARD vs version 1", "lake rules vs version 1"]
    assert plan.problems[1].endswith("channel: a new required field (rule: add-optional-field)")
