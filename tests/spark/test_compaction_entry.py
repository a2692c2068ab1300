"""Compaction entry points without a Spark job: CLI argument errors, Glue arguments, metric sinks, fault specs."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from compaction import __main__ as cli
from compaction import glue_entry
from compaction.faults import CRASH_ENV, FaultInjector
from compaction.job import MB, CompactionSettings, last_closed_hour
from compaction.metrics import CloudWatchMetricSink, Metric


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run-local"], "the following arguments are required: --lake"),
        (["run-local", "--lake", ".", "--hour", "2026-01-01 05"], "is not in the form YYYY-MM-DDTHH"),
        (["run-local", "--lake", ".", "--target-file-mb", "0"], "must be more than 0"),
        (["run-local", "--lake", ".", "--target-file-mb", "big"], "is not a number of megabytes"),
        (["run-local", "--lake", ".", "--grace-minutes", "-1"], "-1 must be at least 0"),
        (["run-local", "--lake", ".", "--lookback-hours", "0"], "0 must be at least 1"),
    ],
)
def test_cli_rejects_bad_arguments_with_a_clear_message(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_rejects_a_missing_lake_and_an_open_hour(tmp_path, capsys):
    assert cli.main(["run-local", "--dataset", "clickstream", "--lake", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    this_hour = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H")
    assert cli.main(["run-local", "--dataset", "clickstream", "--lake", str(tmp_path), "--hour", this_hour]) == 2
    assert "is not closed yet" in capsys.readouterr().err


def test_cli_rejects_a_bad_crash_spec(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COMPACTION_CRASH_AT", "lunch")
    assert cli.main(["run-local", "--dataset", "clickstream", "--lake", str(tmp_path)]) == 2
    assert "phase must be one of after_plan" in capsys.readouterr().err


def _config_file(tmp_path, prod_compaction):
    """A config document like config/environments.json: `defaults` plus the blocks that override it."""
    path = tmp_path / "environments.json"
    path.write_text(json.dumps({
        "project": "streamlake",
        "defaults": {"compaction": {"target_file_mb": 128, "grace_minutes": 15, "lookback_hours": 48, "workers": 2,
                                    "iceberg_snapshot_retention_hours": 168}},
        "environments": {"dev": None, "prod": {"compaction": prod_compaction}},
    }))
    return path


def test_cli_defaults_are_the_environments_block_merged_over_the_files_defaults(tmp_path):
    path = _config_file(tmp_path, {"grace_minutes": 30, "target_file_mb": 0.5})
    assert cli._config_defaults("dev", path) == {"target_file_mb": 128, "grace_minutes": 15, "lookback_hours": 48,
                                                 "iceberg_snapshot_retention_hours": 168}
    assert cli._config_defaults("prod", path) == {"target_file_mb": 0.5, "grace_minutes": 30, "lookback_hours": 48,
                                                  "iceberg_snapshot_retention_hours": 168}


@pytest.mark.parametrize(
    ("prod_compaction", "environment", "message"),
    [
        ({}, "qa", "environments.json: no environment 'qa'; configured: dev, prod"),
        ({"grace_minutes": -1}, "prod", "environments.json: prod.compaction.grace_minutes: -1 must be at least 0"),
        ({"lookback_hours": 1.5}, "prod", "prod.compaction.lookback_hours: '1.5' is not a whole number"),
        ({"target_file_mb": 0}, "prod", "prod.compaction.target_file_mb: 0 must be more than 0"),
        ({"target_file_mb": "128"}, "prod", "prod.compaction.target_file_mb: '128' must be a number"),
        ({"target_file_mb": True}, "prod", "prod.compaction.target_file_mb: True must be a number"),
        ({"target_file_mb": None}, "prod", "prod.compaction.target_file_mb: None must be a number"),
        ({"iceberg_snapshot_retention_hours": 0}, "prod", "prod.compaction.iceberg_snapshot_retention_hours: 0 must be at least 1"),
    ],
)
def test_cli_rejects_a_bad_default_naming_the_file_and_the_field(tmp_path, prod_compaction, environment, message):
    with pytest.raises(ValueError) as refused:
        cli._config_defaults(environment, _config_file(tmp_path, prod_compaction))
    assert message in str(refused.value)


def test_cli_rejects_a_missing_or_broken_config_file(tmp_path):
    with pytest.raises(ValueError, match=r"cannot read .*nowhere.json: No such file or directory"):
        cli._config_defaults("dev", tmp_path / "nowhere.json")
    broken = tmp_path / "environments.json"
    broken.write_text('{"environments": ')
    with pytest.raises(ValueError, match=r"environments.json: not valid JSON at line 1 column 18: Expecting value"):
        cli._config_defaults("dev", broken)
    broken.write_text('{"environments": {"dev": {"compaction": {"grace_minutes": 15}}}}')
    with pytest.raises(ValueError, match=r"dev.compaction.target_file_mb: missing \(required\)"):
        cli._config_defaults("dev", broken)


def test_cli_exits_2_when_its_defaults_cannot_be_read(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(CRASH_ENV, raising=False)
    assert cli.main(["run-local", "--dataset", "clickstream", "--lake", str(tmp_path), "--environment", "qa"]) == 2
    assert "error: " in (err := capsys.readouterr().err) and "no environment 'qa'; configured: dev, staging, prod" in err
    monkeypatch.setattr(cli, "CONFIG_PATH", tmp_path / "nowhere.json")
    assert cli.main(["run-local", "--dataset", "clickstream", "--lake", str(tmp_path)]) == 2
    assert "nowhere.json: No such file or directory" in capsys.readouterr().err


def test_last_closed_hour_respects_the_grace_period():
    now = datetime(2026, 1, 1, 6, 10, tzinfo=timezone.utc)
    assert last_closed_hour(now, 15) == datetime(2026, 1, 1, 4, tzinfo=timezone.utc)
    assert last_closed_hour(now, 5) == datetime(2026, 1, 1, 5, tzinfo=timezone.utc)


def test_glue_arguments_resolve_to_settings():
    pytest.importorskip("awsglue")
    argv = ["script.py", "--JOB_NAME", "compaction", "--lake_tables", '{"clickstream":"s3://lake-bucket/lake"}', "--environment", "prod",
            "--target_file_mb", "128", "--grace_minutes", "15", "--lookback_hours", "48",
            "--metrics_namespace", "StreamLake", "--metrics_region", "eu-west-1", "--TempDir", "s3://temp/glue-temp/compaction/",
            "--iceberg_tables", '{"orders":{"table":"lake_db.orders","location":"s3://lake-bucket/orders/iceberg/"}}',
            "--iceberg_snapshot_retention_hours", "168"]
    args = glue_entry.resolve_arguments(argv)
    assert glue_entry.lake_tables(args) == {"clickstream": "s3://lake-bucket/lake"}
    assert glue_entry.iceberg_tables(args) == {"orders": ("lake_db", "orders", "s3://lake-bucket/orders/iceberg/")}
    with pytest.raises(ValueError, match="--iceberg_tables: .* is not a JSON object"):
        glue_entry.iceberg_tables({"iceberg_tables": '{"orders":{"table":"orders"}}'})
    with pytest.raises(ValueError, match="both empty"):
        glue_entry.lake_tables({"lake_tables": "{}", "iceberg_tables": "{}"})
    assert glue_entry.lake_tables({"lake_tables": "{}", "iceberg_tables": '{"o":{"table":"d.o","location":"s3://b/o/"}}'}) == {}
    assert glue_entry.settings_from_arguments(args) == CompactionSettings(
        lake_path="", target_file_bytes=128 * MB, grace_minutes=15, lookback_hours=48,
        environment="prod")
    with_hour = glue_entry.resolve_arguments([*argv, "--hour", "2026-01-01T05"])
    assert glue_entry.settings_from_arguments(with_hour).hour == datetime(2026, 1, 1, 5, tzinfo=timezone.utc)
    from awsglue.utils import GlueArgumentError

    with pytest.raises(ValueError, match="--lake_tables: '\\[\\]' is not a JSON object of dataset name -> lake path"):
        glue_entry.lake_tables({"lake_tables": "[]"})
    with pytest.raises(GlueArgumentError, match="required: --lake_tables"):
        glue_entry.resolve_arguments(argv[:3])


def test_glue_argument_errors_name_the_argument():
    args = {"lake_path": "s3://b/l", "environment": "dev", "target_file_mb": "lots", "grace_minutes": "15",
            "lookback_hours": "48", "metrics_namespace": "StreamLake"}
    with pytest.raises(ValueError, match="--target_file_mb: 'lots' is not a number"):
        glue_entry.settings_from_arguments(args)
    with pytest.raises(ValueError, match="--lookback_hours: 0 must be at least 1"):
        glue_entry.settings_from_arguments({**args, "target_file_mb": "128", "lookback_hours": "0"})


def test_glue_entry_imports_no_glue_or_spark_at_module_level():
    source = glue_entry.__loader__.get_source(glue_entry.__name__)
    module_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert module_level == ["from __future__ import annotations", "import sys"]
    assert set(glue_entry.JOB_ARGUMENTS) == {"JOB_NAME", "lake_tables", "environment", "target_file_mb", "grace_minutes",
                                             "lookback_hours", "metrics_namespace", "metrics_region", "iceberg_tables",
                                             "iceberg_snapshot_retention_hours"}


def test_cloudwatch_sink_sends_the_environment_dimension():
    calls = []

    class FakeCloudWatch:
        def put_metric_data(self, **kwargs):
            calls.append(kwargs)

    sink = CloudWatchMetricSink("staging", client=FakeCloudWatch())
    sink.publish([Metric("CompactionSucceeded", 1), Metric("CompactionDurationMs", 1234, "Milliseconds")])
    assert calls == [{
        "Namespace": "StreamLake",
        "MetricData": [
            {"MetricName": "CompactionSucceeded", "Value": 1.0, "Unit": "Count",
             "Dimensions": [{"Name": "Environment", "Value": "staging"}]},
            {"MetricName": "CompactionDurationMs", "Value": 1234.0, "Unit": "Milliseconds",
             "Dimensions": [{"Name": "Environment", "Value": "staging"}]},
        ],
    }]


@pytest.mark.parametrize("spec", ["after_lunch", "publish:0", "publish:x"])
def test_fault_spec_is_validated(spec):
    with pytest.raises(ValueError, match="COMPACTION_CRASH_AT"):
        FaultInjector(spec)


def test_fault_hooks_see_every_phase_without_a_crash_spec():
    seen = []
    faults = FaultInjector("", lambda phase, context: seen.append((phase, context)))
    faults.point("after_plan", partition="p")
    faults.watch_staging(lambda: True)
    assert seen == [("after_plan", {"partition": "p"}), ("staging_write", {})]


def test_metrics_clients_publish_in_the_jobs_region_not_the_process_default(monkeypatch):
    """Both jobs get --metrics_region from the stack; boto3's default region comes from the environment."""
    pytest.importorskip("boto3")
    from glue_jobs.metrics import CloudWatchMetricsSink

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert CloudWatchMetricSink("dev", region="eu-west-1").client.meta.region_name == "eu-west-1"
    assert CloudWatchMetricsSink(environment="dev", region="eu-west-1").client.meta.region_name == "eu-west-1"
