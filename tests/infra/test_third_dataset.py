"""A team adds a dataset through files only: a folder under a copy of datasets/, a stream bound to it in the
dev config and named among the sources of dev's shared job "ingest". No Python is edited. The environment synthesizes with the dataset's typed lake table, registry
schema and job arguments; the local runner and the compaction (the same commands a team runs) process its
records end to end; pyarrow, a reader the project did not write, reads the table back typed.

The new dataset's key is `event_id`, like clickstream's, and the test writes records of both datasets that
share key values in the same hour: each dataset keeps its own rows after compaction (duplicates collapse
within a dataset, never across datasets).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from devtools.template_sources import job_sources, source_arguments
from glue_jobs import datasets
from infra.config import DEFAULT_CONFIG_PATH, REPO_ROOT, parse_config

pq = pytest.importorskip("pyarrow.parquet")

SCHEMA = {
    "type": "record", "name": "Reading", "namespace": "com.example.sensors", "fields": [
        {"name": "event_id", "type": "string"},
        {"name": "device", "type": {"type": "record", "name": "Device", "fields": [
            {"name": "id", "type": "string"}, {"name": "site", "type": ["null", "string"], "default": None}]}},
        {"name": "taken_at", "type": "long"},
        {"name": "readings", "type": {"type": "array", "items": {"type": "record", "name": "Value", "fields": [
            {"name": "metric", "type": {"type": "enum", "name": "Metric", "symbols": ["temp", "humidity"]}},
            {"name": "value", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}}]}}},
        {"name": "calibrated_on", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
    ]}
CONTRACT = {
    "description": "Sensor readings from the plant floor", "key": ["event_id"],
    "event_time": {"field": "taken_at", "format": "epoch_seconds", "not_before": "2020-01-01T00:00:00Z", "max_future": "PT1H"},
    "rules": {"readings": {"min_items": 1}, "readings[].value": {"min": -50, "max": 150}, "readings[].metric": {"normalize": ["trim", "lower"]}},
}
HOUR = 1_763_000_000 // 3600 * 3600  # 2025-11-13T02:00:00Z, a closed hour


def _reading(event_id: str, minute: int, value: float = 21.5, **changes) -> dict:
    record = {"event_id": event_id, "device": {"id": "d-1", "site": "north"}, "taken_at": HOUR + 60 * minute,
              "readings": [{"metric": "temp", "value": value}, {"metric": " Humidity ", "value": 40}], "calibrated_on": "2025-01-31"}
    record.update(changes)
    return record


def add_sensor_readings(datasets_root: Path) -> None:
    """The team's files: the dataset's folder under `datasets_root` (a copy of datasets/)."""
    folder = datasets_root / "sensor_readings"
    folder.mkdir()
    (folder / "schema.v1.avsc").write_text(json.dumps(SCHEMA, indent=2))
    (folder / "dataset.json").write_text(json.dumps(CONTRACT, indent=2))
    (folder / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": datasets.file_digest((folder / "schema.v1.avsc").read_bytes())}))


def bind_sensors(config: dict) -> dict:
    """The team's config lines: a stream `sensors` carrying it in dev, and its name among dev's shared job's sources."""
    dev = config["environments"]["dev"]
    dev["kinesis_streams"].append(
        {"name": "sensors", "dataset": "sensor_readings", "capacity_mode": "on_demand", "shard_count": None, "retention_hours": 24})
    (ingest,) = dev["streaming_jobs"]
    ingest["sources"].append("sensors")  # it joins the job that runs clickstream, orders and the routed events
    return config


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("team")
    shutil.copytree(REPO_ROOT / "datasets", root / "datasets")
    add_sensor_readings(root / "datasets")
    (root / "environments.json").write_text(json.dumps(bind_sensors(json.loads(DEFAULT_CONFIG_PATH.read_text()))))
    return root


@pytest.fixture
def team_datasets(workspace, monkeypatch):
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(workspace / "datasets"))
    return workspace


def test_the_new_dataset_synthesizes_with_its_typed_table_and_job(team_datasets):
    from devtools.snapshot import synth_templates

    config = parse_config(json.loads((team_datasets / "environments.json").read_text()))
    template = synth_templates(["dev"], config=config)["dev"]
    resources = template["Resources"].values()
    tables = {r["Properties"]["TableInput"]["Name"]: r["Properties"]["TableInput"] for r in resources if r["Type"] == "AWS::Glue::Table"}
    columns = {c["Name"]: c["Type"] for c in tables["sensor_readings"]["StorageDescriptor"]["Columns"]}
    assert columns["device"] == "struct<id:string,site:string>"
    assert columns["readings"] == "array<struct<metric:string,value:decimal(6,2)>>"
    assert columns["taken_at"] == "timestamp" and columns["calibrated_on"] == "date"
    assert tables["sensor_readings"]["Parameters"]["projection.event_date.range"] == "2020-01-01,NOW+1DAYS"
    jobs = [r["Properties"] for r in resources if r["Type"] == "AWS::Glue::Job"]
    (shared,) = [j for j in jobs if j["Command"]["Name"] == "gluestreaming"]  # one streaming job: dev's "ingest"
    assert [s["source_name"] for s in job_sources(shared["DefaultArguments"])] == ["clickstream", "orders", "events", "sensors"]
    # sized by its own block (config/environments.json dev.streaming_jobs[0].streaming), not the environment's
    assert (shared["WorkerType"], shared["NumberOfWorkers"], shared["DefaultArguments"]["--window_size_seconds"]) == ("G.025X", 2, "60")
    (sensors,) = [a for a in source_arguments(shared["DefaultArguments"]) if a["--source_name"] == "sensors"]
    assert sensors["--source_name"] == "sensors" and sensors["--dataset"] == "sensor_readings"
    assert sensors["--dataset_digest"] == datasets.load("sensor_readings").digest
    (compaction,) = [j for j in jobs if j["Command"]["Name"] == "glueetl"]
    parts = compaction["DefaultArguments"]["--lake_tables"]["Fn::Join"][1]
    assert [p for p in parts if isinstance(p, str)] == [
        '{"checkouts":"s3://', '/checkouts","clickstream":"s3://', '/events","orders":"s3://', '/orders","page_views":"s3://',
        '/page_views","sensor_readings":"s3://', '/sensor_readings"}']
    schemas = {r["Properties"]["Name"] for r in resources if r["Type"] == "AWS::Glue::Schema"}
    assert "com.example.sensors.Reading" in schemas


def _run(*args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _lines(path: Path, records: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")


@pytest.mark.e2e
def test_the_new_dataset_runs_end_to_end_with_its_own_verdicts(team_datasets, tmp_path):
    """Its records through the runner and compaction, each bad one a dead letter with its reason and path. (README's
    own path, drafted from samples by `dataset new`, runs in tests/test_readme.py.)"""
    env = {**os.environ, datasets.ROOT_VARIABLE: str(team_datasets / "datasets"), "STREAMLAKE_SPARK_MASTER": "local[2]"}
    valid = [_reading(i, minute) for minute, i in enumerate(["e-1", "e-2", "e-3"])] + [_reading(f"s-{n}", 10 + n) for n in range(5)]
    duplicate = _reading("e-1", 30, value=99)  # a later copy of e-1: collapses
    bad = [
        "{not json",
        json.dumps(_reading("b-1", 1, readings=[])),  # min_items
        json.dumps(_reading("b-2", 1, value=12.345)),  # more fraction digits than the scale
        json.dumps(_reading("b-3", 1, device={"site": "x"})),  # a required nested field missing
        json.dumps(_reading("b-4", 1, taken_at=(HOUR + 60) * 1000)),  # milliseconds where seconds are due
    ]
    _lines(tmp_path / "sensors-in" / "part-1.json", [*valid, duplicate, *bad])
    out = _run("-m", "glue_jobs", "run-local", "--dataset", "sensor_readings", "--source-name", "sensors",
               "--input", str(tmp_path / "sensors-in"), "--lake", str(tmp_path / "sensors-lake"),
               "--dead-letter", str(tmp_path / "sensors-dl"), "--checkpoint", str(tmp_path / "sensors-cp"), "--once", env=env)
    summary = re.search(r"summary: records=(\d+) written=(\d+) dead_letters=(\d+) \((.*)\) duplicates=(\d+)", out)
    records, written, dead, reasons, duplicates = summary.groups()
    assert (int(records), int(written), int(dead), int(duplicates)) == (14, 8, 5, 1)
    assert int(records) == int(written) + int(dead) + int(duplicates)  # counts reconcile
    assert reasons == "malformed_json=1, missing_required_field=1, out_of_range=3"
    _run("-m", "compaction", "run-local", "--dataset", "sensor_readings", "--lake", str(tmp_path / "sensors-lake"),
         "--grace-minutes", "0", "--target-file-mb", "1", env=env)

    table = pq.read_table(str(tmp_path / "sensors-lake"), partitioning="hive")
    rows = sorted(table.to_pylist(), key=lambda r: r["event_id"])
    assert [r["event_id"] for r in rows] == ["e-1", "e-2", "e-3", "s-0", "s-1", "s-2", "s-3", "s-4"]
    first = rows[0]
    assert first["device"] == {"id": "d-1", "site": "north"} and str(first["calibrated_on"]) == "2025-01-31"
    assert first["readings"] == [{"metric": "temp", "value": Decimal("21.50")}, {"metric": "humidity", "value": Decimal("40.00")}]
    assert first["taken_at"].replace(tzinfo=None).isoformat() == "2025-11-13T02:00:00"
    dead_letters = pq.read_table(str(tmp_path / "sensors-dl"), partitioning="hive").to_pylist()
    assert sorted((d["reason"], d["detail"]) for d in dead_letters) == [
        ("malformed_json", "payload is not one JSON object"),
        ("missing_required_field", "device.id: required field absent, null or empty"),
        ("out_of_range", "readings: value out of range (min_items 1)"),
        ("out_of_range", "readings[0].value: value out of range"),
        ("out_of_range", "taken_at: value out of range"),
    ]
    assert {d["payload"] for d in dead_letters} >= {"{not json"}


def test_a_dataset_json_change_shows_in_the_diff_as_an_in_place_job_update(team_datasets):
    """The reviewer sees a contract change: the dataset's digest is a key of its source in the job's --sources, so
    the job carrying it is modified in place (and nothing is replaced), the change named by source."""
    from devtools.diff import diff_templates
    from devtools.snapshot import normalize, synth_templates

    config = parse_config(json.loads((team_datasets / "environments.json").read_text()))
    before = normalize(synth_templates(["dev"], config=config)["dev"])
    contract_file = team_datasets / "datasets" / "sensor_readings" / "dataset.json"
    original = contract_file.read_text()
    try:
        contract_file.write_text(json.dumps({**CONTRACT, "rules": {**CONTRACT["rules"], "device.id": {"min_length": 3}}}))
        after = normalize(synth_templates(["dev"], config=config)["dev"])
    finally:
        contract_file.write_text(original)
    changes = [c for c in diff_templates(before, after) if c.type == "AWS::Glue::Job"]
    assert [(c.kind, c.deploy_fails, c.data_loss) for c in changes] == [("modified", False, False)]
    assert "Ingest" in changes[0].logical_id  # the shared job, and in it sensors' key only
    assert [path for path, _, _ in changes[0].changes] == ["Properties.DefaultArguments.--sources.sensors.dataset_digest"]
