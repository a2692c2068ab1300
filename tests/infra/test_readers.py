"""Readers of the lake per environment (infra/readers.py): the Athena workgroup's enforced settings, the named queries
per dataset, and each dataset's reader policy, which reaches that dataset only."""

from __future__ import annotations

import json

import pytest

from infra.config import load_config, parse_config, update_raw
from infra.config.loader import DEFAULT_CONFIG_PATH


def _of_type(template: dict, type_: str) -> dict[str, dict]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == type_}


def _dead_letter_table(config, source: str, dataset: str) -> str:
    """A source's dead-letter table of `dataset`: the source's own, or a routed source's one per dataset (its
    unroutable records' table belongs to no dataset)."""
    return f"dead_letters_{source}_{dataset}" if source in config.routes else f"dead_letters_{source}"


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_the_workgroup_enforces_encrypted_expiring_results_and_the_scan_limit(templates, environment):
    template, config = templates[environment], load_config().get(environment)
    ((_, workgroup),) = _of_type(template, "AWS::Athena::WorkGroup").items()
    settings = workgroup["WorkGroupConfiguration"]
    assert settings["EnforceWorkGroupConfiguration"] is True and settings["PublishCloudWatchMetricsEnabled"] is True
    assert settings["BytesScannedCutoffPerQuery"] == config.readers.bytes_scanned_cutoff_mb * 1_000_000 >= 10_000_000
    results = settings["ResultConfiguration"]
    assert results["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
    (bucket_id,) = [p["Ref"] for p in results["OutputLocation"]["Fn::Join"][1] if isinstance(p, dict)]
    bucket = template["Resources"][bucket_id]["Properties"]
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == config.readers.results_expiration_days
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert workgroup["Name"] == f"streamlake-{environment}-readers"
    assert "ReadersWorkGroupName" in template["Outputs"] and "AthenaResultsBucketName" in template["Outputs"]


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_three_named_queries_and_a_reader_policy_per_dataset(templates, environment):
    template, config = templates[environment], load_config().get(environment)
    queries = _of_type(template, "AWS::Athena::NamedQuery").values()
    for dataset in config.datasets:
        mine = {q["Name"].split(": ", 1)[1]: q for q in queries if q["Name"].startswith(f"{dataset}: ")}
        assert set(mine) == {"rows per hour", "dead letters by reason", "freshness"}
        assert all(q["WorkGroup"] == f"streamlake-{environment}-readers" for q in mine.values())
        table = "events" if dataset == "clickstream" else dataset
        assert f'"{table}"' in mine["rows per hour"]["QueryString"] and f'"{table}"' in mine["freshness"]["QueryString"]
        sources = list(config.sources_of(dataset))
        dead_letters = [_dead_letter_table(config, s, dataset) for s in sources]
        assert all(f'"{t}"' in mine["dead letters by reason"]["QueryString"] for t in dead_letters)

        (policy_id,) = [k for k in _of_type(template, "AWS::IAM::ManagedPolicy")
                        if k.startswith(f"ReadersReaderPolicy{dataset.title().replace('_', '')}")]
        statements = {s["Sid"]: s for s in template["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"]}
        text = json.dumps(statements)
        assert statements["QueryThroughTheReadersWorkgroup"]["Resource"]["Fn::Join"][1][-1].endswith(
            f":workgroup/streamlake-{environment}-readers")
        tables = {r["Fn::Join"][1][-1].rsplit("/", 1)[-1] for r in statements["ReadTheDatasetsTables"]["Resource"]
                  if ":table/" in r["Fn::Join"][1][-1]}
        assert tables == {table, *dead_letters}
        others = [d for d in config.datasets if d != dataset]
        assert not any(f"/{('events' if o == 'clickstream' else o)}/*" in text for o in others)
        assert "s3:PutObject" in json.dumps(statements["WriteAndReadQueryResults"]) and text.count("s3:PutObject") == 1
        assert statements["DecryptDataEncryptResults"]["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
        assert f"ReaderPolicyArn{dataset.title().replace('_', '')}" in template["Outputs"]


def test_a_scan_limit_under_athenas_minimum_is_refused():
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    with pytest.raises(ValueError, match=r"dev\.readers\.bytes_scanned_cutoff_mb: 9 is out of range: allowed 10 to"):
        parse_config(update_raw(raw, "dev", "readers.bytes_scanned_cutoff_mb", 9))
