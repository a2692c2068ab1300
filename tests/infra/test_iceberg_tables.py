"""A dataset switched to Iceberg through its dataset.json only, synthesized: the job gets Glue's Iceberg jars and
its table's name and location, and may create and commit that one table; the stack creates no Hive table for it
(the job creates the Iceberg table: infra/streaming_job.py says why). cdk-nag runs in the synth."""

from __future__ import annotations

import json

import pytest

from devtools.template_sources import job_sources, source_arguments
from glue_jobs import datasets, glue_entry
from glue_jobs.schema import ICEBERG_TABLE_FOLDER
from infra.config import REPO_ROOT


@pytest.fixture(scope="module")
def iceberg_dev(tmp_path_factory):
    from devtools.iceberg_demo import switch
    from devtools.snapshot import synth_templates

    root = switch(tmp_path_factory.mktemp("iceberg") / "datasets", "orders")
    with pytest.MonkeyPatch.context() as patch:  # datasets.load reads the files on every call: no cache to clear
        patch.setenv(datasets.ROOT_VARIABLE, str(root))
        template = synth_templates(["dev"])["dev"]
    return template  # the root restored: a synth of another fixture while these tests run reads the committed files


def _job(template: dict, source: str) -> tuple[str, dict]:
    (found,) = [(k, r["Properties"]) for k, r in template["Resources"].items() if r["Type"] == "AWS::Glue::Job"
                and "--sources" in r["Properties"]["DefaultArguments"]
                and source in [s["source_name"] for s in job_sources(r["Properties"]["DefaultArguments"])]]
    return found


def _arguments(job: dict, source: str) -> dict:
    """The flat `--name: value` arguments of the job's source `source` (devtools/template_sources.py): the job's own,
    and the keys of its source in --sources."""
    (arguments,) = [a for a in source_arguments(job["DefaultArguments"]) if a["--source_name"] == source]
    return arguments


def _statements_of(template: dict, role: str) -> list[dict]:
    """Every statement the role `role` is given: its inline policies' and those CDK moves to the managed policies it
    attaches when the inline policy outgrows IAM's size limit (dev's "ingest" role, with its routed stream, does)."""
    return [s for r in template["Resources"].values() if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
            and {"Ref": role} in r["Properties"].get("Roles", []) for s in r["Properties"]["PolicyDocument"]["Statement"]]


def test_the_iceberg_datasets_job_creates_and_commits_its_own_table_and_nothing_else(iceberg_dev):
    job_id, orders = _job(iceberg_dev, "orders")
    args = _arguments(orders, "orders")
    assert args["--datalake-formats"] == "iceberg" and args["--lake_table"] == "orders"
    location = args["--lake_table_location"]["Fn::Join"][1]
    assert location[-1] == f"/orders/{ICEBERG_TABLE_FOLDER}"
    # The entrypoint reads exactly these (and the rehearsal checks the same list against the deployed script): the
    # job's own arguments, and the keys of its source in --sources.
    assert {f"--{name}" for name in glue_entry.job_arguments()} - {"--JOB_NAME"} - set(orders["DefaultArguments"]) == set()
    read = {f"--{key}" for key in glue_entry.source_keys("kinesis", "iceberg")}
    assert read - set(args) == set() and {"--lake_table", "--lake_table_location"} <= read
    _, clicks = _job(iceberg_dev, "clickstream")
    assert "--lake_table" not in _arguments(clicks, "clickstream")  # a Parquet dataset in the same job (dev's "ingest")

    tables = {r["Properties"]["TableInput"]["Name"] for r in iceberg_dev["Resources"].values() if r["Type"] == "AWS::Glue::Table"}
    assert "orders" not in tables and "events" in tables
    role = orders["Role"]["Fn::GetAtt"][0]
    statements = _statements_of(iceberg_dev, role)
    (commit,) = [s for s in statements if s.get("Sid") == "CommitIcebergLakeTable"]
    assert sorted(commit["Action"]) == ["glue:CreateTable", "glue:UpdateTable"]
    text = json.dumps(commit["Resource"])
    assert ":table/streamlake_dev/orders" in text and "*" not in text
    others = [s for s in statements if "glue:CreateTable" in json.dumps(s.get("Action")) and s.get("Sid") != "CommitIcebergLakeTable"]
    assert others == []


def test_the_parquet_datasets_are_unchanged(iceberg_dev, templates):
    """Only the Iceberg dataset's source and table differ from the committed datasets' synth, the job zip, which
    carries every dataset's files (so every job of the environment restarts on the deploy that switches one), and
    Glue's Iceberg jars for the job that hosts it (dev's "ingest" hosts clickstream too). Both synths run in this
    process, in either order (the `templates` fixture may be made first here or earlier)."""
    _, before = _job(templates["dev"], "clickstream")
    _, after = _job(iceberg_dev, "clickstream")
    old, new = _arguments(before, "clickstream"), _arguments(after, "clickstream")
    differ = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    assert differ == {"--extra-py-files", "--datalake-formats"}  # every key of clickstream's source is the same
    assert "--datalake-formats" not in old


def test_the_hourly_job_maintains_the_iceberg_table_and_compacts_the_others(iceberg_dev):
    (compaction_id, compaction), = [(k, r["Properties"]) for k, r in iceberg_dev["Resources"].items()
                                    if r["Type"] == "AWS::Glue::Job" and r["Properties"]["Command"]["Name"] == "glueetl"]
    args = compaction["DefaultArguments"]
    assert args["--datalake-formats"] == "iceberg" and args["--iceberg_snapshot_retention_hours"] == "168"
    iceberg = "".join(p if isinstance(p, str) else "<ref>" for p in args["--iceberg_tables"]["Fn::Join"][1])
    assert iceberg == '{"orders":{"table":"streamlake_dev.orders","location":"s3://<ref>/orders/iceberg/"}}'
    compacted = "".join(p if isinstance(p, str) else "<ref>" for p in args["--lake_tables"]["Fn::Join"][1])
    assert compacted == ('{"checkouts":"s3://<ref>/checkouts","clickstream":"s3://<ref>/events",'
                         '"page_views":"s3://<ref>/page_views"}')
    role = compaction["Role"]["Fn::GetAtt"][0]
    statements = [s for r in iceberg_dev["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    (maintain,) = [s for s in statements if s.get("Sid") == "MaintainIcebergTables"]
    assert "glue:UpdateTable" in maintain["Action"] and ":table/streamlake_dev/orders" in json.dumps(maintain["Resource"])


def test_the_demo_switches_one_dataset_by_its_file_only(tmp_path):
    """`make demo`'s switch (devtools/iceberg_demo.py): a copy of datasets/ where only orders' dataset.json changed."""
    from devtools import iceberg_demo

    out = iceberg_demo.switch(tmp_path / "datasets", "orders")
    changed = [p.relative_to(out) for p in out.rglob("*") if p.is_file()
               and p.read_bytes() != (REPO_ROOT / "datasets" / p.relative_to(out)).read_bytes()]
    assert [str(p) for p in changed] == ["orders/dataset.json"]
    assert json.loads((out / "orders" / "dataset.json").read_text())["table_format"] == "iceberg"
    with pytest.raises(ValueError, match="no dataset 'nope'"):
        iceberg_demo.switch(tmp_path / "again", "nope")


def test_an_environment_overrides_the_table_format_of_its_datasets(iceberg_dev, tmp_path):
    """config `table_formats`: dev makes orders Iceberg with the committed dataset.json (which says parquet) and gets
    the same job arguments, grants and tables as the dataset.json switch; with that switch in place, an environment
    keeps the dataset Parquet."""
    from devtools.iceberg_demo import switch
    from devtools.snapshot import synth_templates
    from infra.config import DEFAULT_CONFIG_PATH, parse_config, update_raw

    raw = json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    config = parse_config(update_raw(raw, "dev", "table_formats", {"orders": "iceberg"}))
    assert config.get("dev").table_format("orders", "parquet") == "iceberg"
    overridden = synth_templates(["dev"], config=config)["dev"]
    _, by_config = _job(overridden, "orders")
    _, by_file = _job(iceberg_dev, "orders")
    iceberg_args = ("--datalake-formats", "--lake_table", "--lake_table_location")
    assert [_arguments(by_config, "orders")[a] == _arguments(by_file, "orders")[a] for a in iceberg_args] == [True] * 3
    tables = {r["Properties"]["TableInput"]["Name"] for r in overridden["Resources"].values() if r["Type"] == "AWS::Glue::Table"}
    assert "orders" not in tables  # the job creates the Iceberg table

    back = parse_config(update_raw(raw, "dev", "table_formats", {"orders": "parquet"}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(datasets.ROOT_VARIABLE, str(switch(tmp_path / "datasets", "orders")))
        assert datasets.load("orders").table_format == "iceberg"
        kept = synth_templates(["dev"], config=back)["dev"]
    _, parquet = _job(kept, "orders")
    assert not set(iceberg_args) & set(_arguments(parquet, "orders"))
    assert "orders" in {r["Properties"]["TableInput"]["Name"] for r in kept["Resources"].values() if r["Type"] == "AWS::Glue::Table"}


def test_table_formats_refuse_a_dataset_the_environment_does_not_carry_and_an_unknown_format():
    from infra.config import DEFAULT_CONFIG_PATH, ConfigError, parse_config, update_raw

    raw = json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    raw = update_raw(raw, "dev", "table_formats", {"payments": "iceberg", "orders": "delta"})
    with pytest.raises(ConfigError) as raised:
        parse_config(raw)
    problems = raised.value.problems
    assert "dev.table_formats.orders: 'delta' is not one of parquet, iceberg" in problems
    assert any(p.startswith("dev.table_formats: 'payments' is no dataset of this environment") for p in problems), problems
