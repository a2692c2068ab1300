"""make diff: a config change to one environment shows up for that environment only, priced."""

from __future__ import annotations

import json

from infra import diff
from infra.config import DEFAULT_CONFIG_PATH, load_config, parse_config, update_raw
from infra.snapshot import synth_templates


def test_shard_increase_in_prod_only_shows_in_prod_with_positive_cost_delta(templates):
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    base_config = load_config()
    changed = parse_config(update_raw(raw, "prod", "kinesis_streams", [
        {"name": "clickstream", "capacity_mode": "provisioned", "shard_count": 16, "retention_hours": 168}]))
    new_templates = synth_templates(config=changed)
    report = diff.render_report(templates, new_templates, base_config, changed, "HEAD")
    sections = {s.split("\n", 1)[0]: s for s in report.split("\n## ")[1:]}
    assert "No infrastructure changes." in sections["dev"]
    assert "No infrastructure changes." in sections["staging"]
    prod = sections["prod"]
    assert "0 added, 0 removed, 0 replaced, 1 modified" in prod
    assert "`Properties.ShardCount`: 8 → 16" in prod
    assert "(**+87.60**)" in prod  # 8 more shards x 730 h x 0.015 USD
    # the reverse change reads as a saving
    reverse = diff.render_report(new_templates, templates, changed, base_config, "HEAD")
    assert "(**-87.60**)" in reverse


def test_security_changes_are_listed_first_and_replacements_detected():
    old = {"Resources": {
        "Role": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {"Statement": [{"Action": "s3:GetObject"}]}}},
        "Stream": {"Type": "AWS::Kinesis::Stream", "Properties": {"Name": "a", "ShardCount": 1}},
        "Old": {"Type": "AWS::SNS::Topic", "Properties": {}},
    }}
    new = {"Resources": {
        "Role": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {"Statement": [{"Action": "s3:*"}]}}},
        "Stream": {"Type": "AWS::Kinesis::Stream", "Properties": {"Name": "b", "ShardCount": 1}},
        "New": {"Type": "AWS::SQS::Queue", "Properties": {}},
    }}
    changes = {c.logical_id: c for c in diff.diff_templates(old, new)}
    assert {k: c.kind for k, c in changes.items()} == {"New": "added", "Old": "removed", "Role": "modified", "Stream": "replaced"}
    assert changes["Role"].changes == [("Properties.PolicyDocument.Statement[0].Action", "s3:GetObject", "s3:*")]
    text = diff.render_environment("dev", list(changes.values()), 10.0, 10.0)
    assert text.index("IAM, security group and policy changes") < text.index("### Replaced") < text.index("### Removed")
    assert "(**±0.00**)" in text
