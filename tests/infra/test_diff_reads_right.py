"""make diff reads right: IAM statements matched by Sid or content, values whole or their difference marked, every
changed priced setting priced (a usage-billed one by its rate per unit), and a synth without deprecation warnings.
Template dicts built here: no synth but in the last test."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

from devtools import diff
from infra.config import REPO_ROOT

PRICES = {
    "hours_per_month": 730,
    "kinesis": {"provisioned_shard_hour": 0.015, "extended_retention_shard_hour": 0.02, "on_demand_stream_hour": 0.04,
                "on_demand_gb_in": 0.08, "on_demand_gb_out": 0.04},
    "cloudwatch": {"metric_month": 0.30},
    "glue": {"dpu_hour": 0.44, "flex_dpu_hour": 0.29, "dpu_per_worker": {"G.025X": 0.25, "G.1X": 1, "G.2X": 2}},
    "msk": {"broker_hour": {"kafka.m7g.large": 0.204}, "storage_gb_month": 0.10},
    "network": {"nat_gateway_hour": 0.045, "interface_endpoint_hour_per_az": 0.01},
}


def _statement(action: str, resource: str, sid: str | None = None) -> dict:
    return {**({"Sid": sid} if sid else {}), "Action": action, "Effect": "Allow", "Resource": resource}


def _policy(statements: list[dict]) -> dict:
    return {"Resources": {"Policy": {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyName": "jobs", "PolicyDocument": {"Version": "2012-10-17", "Statement": statements}}}}}


STATEMENTS = [_statement(f"s3:Action{i}", f"arn:aws:s3:::bucket-{i}/*") for i in range(8)] + [
    _statement("kms:Decrypt", "arn:aws:kms:eu-west-1:111122223333:key/k", sid="UseKey")]


def _lines(old: dict, new: dict) -> list[str]:
    text = diff.render_environment("dev", diff.diff_templates(old, new, PRICES), None, diff.CostRange(0.0, 0.0))
    return [line for line in text.splitlines() if line.startswith("  - ")]


def test_one_added_statement_shows_as_one_added_statement():
    new = [*STATEMENTS[:2], _statement("sqs:SendMessage", "arn:aws:sqs:eu-west-1:111122223333:dlq"), *STATEMENTS[2:]]
    (change,) = diff.diff_templates(_policy(STATEMENTS), _policy(new), PRICES)
    assert [(path, before) for path, before, _ in change.changes] == [("Properties.PolicyDocument.Statement[2]", None)]
    lines = _lines(_policy(STATEMENTS), _policy(new))
    assert lines == ["  - `Properties.PolicyDocument.Statement[2]`: **added statement**"]
    # and removing it again: one removed statement
    (change,) = diff.diff_templates(_policy(new), _policy(STATEMENTS), PRICES)
    assert [(path, after) for path, _, after in change.changes] == [("Properties.PolicyDocument.Statement[was 2]", None)]


def test_a_changed_statement_shows_as_that_statement_changed():
    new = copy.deepcopy(STATEMENTS)
    new[4]["Resource"] = "arn:aws:s3:::other-bucket/*"  # same Action: the same statement, on another resource
    new[8]["Action"] = ["kms:Decrypt", "kms:GenerateDataKey"]  # by Sid
    del new[0]  # and one removed before them: no shift
    (change,) = diff.diff_templates(_policy(STATEMENTS), _policy(new), PRICES)
    assert [(p, a, b) for p, a, b in change.changes] == [
        ("Properties.PolicyDocument.Statement[3, was 4].Resource", "arn:aws:s3:::bucket-4/*", "arn:aws:s3:::other-bucket/*"),
        ("Properties.PolicyDocument.Statement[Sid=UseKey].Action", "kms:Decrypt", ["kms:Decrypt", "kms:GenerateDataKey"]),
        ("Properties.PolicyDocument.Statement[was 0]", STATEMENTS[0], None),
    ]
    lines = _lines(_policy(STATEMENTS), _policy(new))
    assert any("added `kms:GenerateDataKey`" in line for line in lines)
    # a statement changed in both what and where pairs with nothing: removed and added
    other = [*STATEMENTS[:8], _statement("kms:Encrypt", "arn:aws:kms:eu-west-1:111122223333:key/other")]
    (change,) = diff.diff_templates(_policy(STATEMENTS), _policy(other), PRICES)
    assert sorted((a is None, b is None) for _, a, b in change.changes) == [(False, True), (True, False)]
    # the same statements in another order, Actions in another order: no change
    shuffled = [{**s, "Action": [s["Action"]]} for s in reversed(STATEMENTS)]
    assert diff.diff_templates(_policy(STATEMENTS), _policy(shuffled), PRICES) == []


def test_a_long_value_is_shown_whole_with_its_difference_marked():
    head = "SELECT " + ", ".join(f"column_{i}" for i in range(40)) + " FROM events WHERE "
    old = {"Resources": {"Q": {"Type": "AWS::Athena::NamedQuery", "Properties": {"QueryString": head + "a = 1"}}}}
    new = {"Resources": {"Q": {"Type": "AWS::Athena::NamedQuery", "Properties": {"QueryString": head + "a = 2"}}}}
    text = diff.render_environment("dev", diff.diff_templates(old, new, PRICES), None, diff.CostRange(0.0, 0.0))
    assert "…" not in text
    assert f"-{head}a = 1" in text and f"+{head}a = 2" in text  # both whole
    assert f"first difference at character {len(head) + 5}" in text


def _stream(mode: str, hours: int, shards: int | None = None) -> dict:
    props = {"RetentionPeriodHours": hours, "StreamModeDetails": {"StreamMode": mode}}
    return {"Type": "AWS::Kinesis::Stream", "Properties": {**props, **({"ShardCount": shards} if shards else {})}}


def test_a_retention_change_is_priced_per_unit_on_demand_and_per_month_provisioned():
    old = {"Resources": {"OnDemand": _stream("ON_DEMAND", 24), "Provisioned": _stream("PROVISIONED", 24, 2),
                         "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": "a"}}}}
    new = {"Resources": {"OnDemand": _stream("ON_DEMAND", 168), "Provisioned": _stream("PROVISIONED", 168, 2),
                         "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": "b"}}}}
    changes = {c.logical_id: c for c in diff.diff_templates(old, new, PRICES)}
    on_demand = changes["OnDemand"].prices["Properties.RetentionPeriodHours"]
    assert "per GB-month" in on_demand and "+0.00" not in on_demand and "±0.00" not in on_demand
    # 2 shards x 730 h x 0.02 USD per shard-hour of extended retention
    assert changes["Provisioned"].prices["Properties.RetentionPeriodHours"] == "💲 +29.20 USD a month"
    lines = _lines(old, new)
    assert "  - `Properties.RetentionPeriodHours`: 24 → 168 — 💲 +29.20 USD a month" in lines
    # a changed setting of a priced type that is not priced says so
    old["Resources"]["Provisioned"]["Properties"]["Tags"] = [{"Key": "team", "Value": "a"}]
    new["Resources"]["Provisioned"]["Properties"]["Tags"] = [{"Key": "team", "Value": "b"}]
    tags = diff.diff_templates(old, new, PRICES)
    assert {c.logical_id: c for c in tags}["Provisioned"].prices["Properties.Tags[0].Value"] == "not priced"


def test_a_synth_prints_no_deprecation_warning():
    """A fresh process (jsii prints each deprecation once per process, so the session's synth cannot be reused)
    synthesizes dev as `make synth` does and says nothing on stderr about deprecated APIs."""
    env = {**os.environ, "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{REPO_ROOT / 'node_modules' / '.bin'}"
                                 f"{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", "from devtools.snapshot import synth_templates; synth_templates(['dev'])"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "deprecated" not in proc.stderr, proc.stderr[-3000:]
