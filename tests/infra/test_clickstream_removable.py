"""clickstream is a dataset like any other: a team may delete datasets/clickstream. Its schema has one home, that
folder (glue_jobs.schema reads it through glue_jobs.datasets), read when asked for, never at import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from glue_jobs import datasets
from infra.config import REPO_ROOT

pytest.importorskip("pyspark")

# Imports every job module (the packages the zip carries, the entrypoints too), then asks for clickstream's schema.
IMPORT_EVERY_JOB_MODULE = """
import importlib, pkgutil
import compaction, glue_jobs
for package in (glue_jobs, compaction):
    for module in pkgutil.iter_modules(package.__path__):
        if module.name != "__main__":
            importlib.import_module(f"{package.__name__}.{module.name}")
import glue_jobs.contract.typed_contract, glue_jobs.lake.packed_batch, glue_jobs.glue_entry, compaction.glue_entry
from glue_jobs import datasets, schema
assert datasets.names() == ("checkouts", "orders", "page_views"), datasets.names()
assert sorted(datasets.load_all()) == ["checkouts", "orders", "page_views"]
for ask in (schema.contract_fields, schema.avro_full_name):
    try:
        ask()
    except datasets.DatasetError as error:
        assert "clickstream: dataset.json is missing" in str(error), error
    else:
        raise AssertionError(f"{ask.__name__} read a clickstream that is not there")
print("imported")
"""

# Then runs the orders job locally over generated records: the job's runtime (sources, lake table, typed contract,
# writes) needs no clickstream either.
RUN_ORDERS = """
import io, sys
from pathlib import Path
from glue_jobs import datasets
from glue_jobs.dataset_generate import generate_dataset
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.local_runner import run_local
work = Path(sys.argv[1])
expect = generate_dataset(datasets.load("orders"), work / "in", records=200, files=2, bad_ratio=0.05, seed=3)
totals = run_local(input_dir=str(work / "in"), lake_dir=str(work / "lake"), dead_letter_dir=str(work / "dead"),
                   checkpoint_dir=str(work / "cp"), once=True, dataset="orders", out=io.StringIO()).totals()
assert totals["records_written"] == len(expect.valid_keys), (totals, len(expect.valid_keys))
assert totals["records_in"] == totals["records_written"] + totals["dead_letters"] + totals["duplicates_collapsed"], totals
assert totals["dead_letters"] > 0, totals
print("ran")
"""


@pytest.mark.e2e
def test_every_job_module_imports_and_orders_runs_without_the_clickstream_dataset(tmp_path):
    root = tmp_path / "datasets"
    shutil.copytree(REPO_ROOT / "datasets", root)
    shutil.rmtree(root / "clickstream")
    assert sorted(p.name for p in root.iterdir()) == ["checkouts", "orders", "page_views"]
    env = {**os.environ, datasets.ROOT_VARIABLE: str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", IMPORT_EVERY_JOB_MODULE], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "imported"
    done = subprocess.run([sys.executable, "-c", RUN_ORDERS, str(tmp_path / "run")], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ran")


def test_an_environment_without_the_clickstream_dataset_synthesizes_and_diffs(tmp_path, monkeypatch):
    """A project whose datasets/ has no clickstream, its streams bound to orders: dev synthesizes (cdk-nag
    enforced), with orders' registry schema and lake table and none of clickstream's resources, and `make
    diff`'s schema checks run on the datasets that are there."""
    import json

    from devtools import diff
    from devtools.snapshot import synth_templates
    from infra.config import DEFAULT_CONFIG_PATH, parse_config

    root = tmp_path / "datasets"
    shutil.copytree(REPO_ROOT / "datasets", root)
    shutil.rmtree(root / "clickstream")
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(root))
    config = json.loads(DEFAULT_CONFIG_PATH.read_text())
    for block in (config["defaults"], *config["environments"].values()):
        if "kinesis_streams" in block:
            # each stream of one dataset is bound to orders; dev's routed `events` (page_views, checkouts) stays
            block["kinesis_streams"] = [stream if "route" in stream else {**stream, "dataset": "orders"}
                                        for stream in block["kinesis_streams"]]
    template = synth_templates(["dev"], config=parse_config(config))["dev"]
    resources = template["Resources"]
    schemas = [r["Properties"]["Name"] for r in resources.values() if r["Type"] == "AWS::Glue::Schema"]
    assert schemas == [datasets.load(name).avro_full_name for name in ("checkouts", "orders", "page_views")]
    assert not [i for i in resources if i.startswith("EventSchema")]
    tables = {r["Properties"]["TableInput"]["Name"] for r in resources.values() if r["Type"] == "AWS::Glue::Table"}
    assert "orders" in tables and "events" not in tables
    assert "EventSchemaName" not in template["Outputs"] and "LakeTableName" not in template["Outputs"]
    assert "SchemaNameOrders" in template["Outputs"]
    assert diff.schema_check() == ("Event schema: none (no datasets/clickstream)", [])
    line, problems = diff.dataset_check()
    there = [f"{name} v{datasets.load(name).latest_version} (contract {datasets.load(name).digest})"
             for name in ("checkouts", "orders", "page_views")]
    assert problems == [] and line.startswith(f"Datasets: {', '.join(there)}; "), line
