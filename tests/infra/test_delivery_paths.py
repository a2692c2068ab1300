"""Every notification and invocation the templates set up reaches its destination: from each alarm action and each
EventBridge target to the topic or function it names, checking that the destination's resource policy (and, for an
encrypted topic, its key policy) lets that service in, with only the confused-deputy conditions the service is
documented to send. The same walk runs on the templates of 1d225b0 (tests/infra/fixtures/templates_1d225b0), where no
alarm could notify anyone (the topic policy allowed EventBridge only), and must find that.

What each service is documented to need:
- CloudWatch alarm -> SNS: a topic policy statement for cloudwatch.amazonaws.com and sns:Publish, optionally with
  aws:SourceArn of the alarm (AWS Knowledge Center "Why didn't I receive an SNS notification for my CloudWatch alarm
  trigger?"); on an encrypted topic kms:GenerateDataKey* and kms:Decrypt in the key policy, with aws:SourceAccount and
  aws:SourceArn allowed (SNS "Key management").
- EventBridge rule -> SNS: sns:Publish for events.amazonaws.com without a Condition ("You can't use Condition blocks in
  Amazon SNS topic policies for EventBridge", EventBridge "Amazon SNS permissions"), and the key statement without
  source keys (SNS "Key management": not supported for EventBridge-to-encrypted topics).
- EventBridge rule -> Lambda: an AWS::Lambda::Permission for events.amazonaws.com whose SourceArn is that rule.
- CloudFormation custom resource -> Lambda: CloudFormation invokes the ServiceToken with the deployer's credentials (no
  resource policy involved); the function must exist, and the job keeper's deploy resources must fail within 15
  minutes of a dropped invocation (their ServiceTimeout), not CloudFormation's default hour.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from infra.config import load_config
from infra.job_keeper import DEPLOY_RESOURCE_TYPE

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "templates_1d225b0"
ALARM_SOURCE_KEYS = {"aws:SourceArn", "aws:SourceAccount"}  # what the key and topic statements for alarms may require


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def _ref_target(value) -> str | None:
    """The logical id an action or target ARN refers to (Ref a topic, GetAtt a function's Arn)."""
    if isinstance(value, dict) and "Ref" in value:
        return value["Ref"]
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return value["Fn::GetAtt"][0]
    return None


def _allows(statements: list[dict], service: str, action: str, resource_ok, allowed_conditions: set[str]) -> bool:
    for st in statements:
        if st.get("Effect") != "Allow" or service not in _list((st.get("Principal") or {}).get("Service", [])):
            continue
        actions = _list(st.get("Action", []))
        if not any(a == action or (a.endswith("*") and action.startswith(a[:-1])) for a in actions):
            continue
        if not any(resource_ok(r) for r in _list(st.get("Resource", []))):
            continue
        keys = {key for operator in (st.get("Condition") or {}).values() for key in operator}
        if keys <= allowed_conditions:
            return True
    return False


def _topic_policy(resources: dict, topic_id: str) -> list[dict]:
    return [st for r in resources.values() if r["Type"] == "AWS::SNS::TopicPolicy"
            and {"Ref": topic_id} in r["Properties"]["Topics"] for st in r["Properties"]["PolicyDocument"]["Statement"]]


def _topic_problems(resources: dict, topic_id: str, service: str, allowed: set[str], who: str) -> list[str]:
    problems = []
    topic = resources.get(topic_id)
    if topic is None or topic["Type"] != "AWS::SNS::Topic":
        return [f"{who}: its action {topic_id} is not a topic of the template"]
    if not _allows(_topic_policy(resources, topic_id), service, "sns:Publish", lambda r: r == {"Ref": topic_id}, allowed):
        problems.append(f"{who}: the policy of topic {topic_id} does not allow {service} to sns:Publish")
    key_ref = topic["Properties"].get("KmsMasterKeyId")
    if key_ref is not None:
        key_id = _ref_target(key_ref)
        statements = resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            if not _allows(statements, service, action, lambda r: r == "*", allowed):
                problems.append(f"{who}: the key {key_id} of topic {topic_id} does not allow {service} to {action}")
    return problems


def delivery_problems(template: dict) -> tuple[list[str], dict[str, int]]:
    """(every broken path, how many paths of each kind were walked)."""
    resources = template["Resources"]
    problems: list[str] = []
    walked = {"alarm actions": 0, "rule targets": 0, "custom resources": 0}
    for alarm_id, alarm in resources.items():
        if alarm["Type"] != "AWS::CloudWatch::Alarm":
            continue
        actions = [a for key in ("AlarmActions", "OKActions", "InsufficientDataActions") for a in alarm["Properties"].get(key, [])]
        if not actions:
            problems.append(f"alarm {alarm_id}: no action, it notifies no one")
        for action in actions:
            walked["alarm actions"] += 1
            problems += _topic_problems(resources, _ref_target(action), "cloudwatch.amazonaws.com", ALARM_SOURCE_KEYS,
                                        f"alarm {alarm_id}")
    for rule_id, rule in resources.items():
        if rule["Type"] != "AWS::Events::Rule":
            continue
        for target in rule["Properties"].get("Targets", []):
            walked["rule targets"] += 1
            target_id = _ref_target(target["Arn"])
            kind = resources.get(target_id, {}).get("Type")
            if kind == "AWS::SNS::Topic":
                problems += _topic_problems(resources, target_id, "events.amazonaws.com", set(), f"rule {rule_id}")
            elif kind == "AWS::Lambda::Function":
                allowed = [p for p in resources.values() if p["Type"] == "AWS::Lambda::Permission"
                           and _ref_target(p["Properties"]["FunctionName"]) == target_id
                           and p["Properties"]["Principal"] == "events.amazonaws.com"
                           and p["Properties"]["Action"] == "lambda:InvokeFunction"
                           and p["Properties"].get("SourceArn") == {"Fn::GetAtt": [rule_id, "Arn"]}]
                if not allowed:
                    problems.append(f"rule {rule_id}: no permission lets it invoke function {target_id}")
            else:
                problems.append(f"rule {rule_id}: target {target_id} ({kind}) is not a checked destination")
    for resource_id, resource in resources.items():
        if not resource["Type"].startswith("Custom::") or resource["Type"] == "Custom::VpcRestrictDefaultSG":
            continue
        walked["custom resources"] += 1
        function_id = _ref_target(resource["Properties"]["ServiceToken"])
        if resources.get(function_id, {}).get("Type") != "AWS::Lambda::Function":
            problems.append(f"custom resource {resource_id}: its ServiceToken is no function of the template")
        if resource["Type"] == DEPLOY_RESOURCE_TYPE and int(resource["Properties"].get("ServiceTimeout", 3600)) > 900:
            problems.append(f"custom resource {resource_id}: a dropped invocation fails the deploy only after an hour")
    return problems, walked


def _count(template: dict, type_: str) -> int:
    return sum(r["Type"] == type_ for r in template["Resources"].values())


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_every_alarm_and_rule_reaches_its_destination(templates, environment):
    template = templates[environment]
    problems, walked = delivery_problems(template)
    assert problems == []
    alarms = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    # every alarm visited (counted from the template): each has an alarm and an OK action
    assert walked["alarm actions"] == sum(len(a.get("AlarmActions", [])) + len(a.get("OKActions", [])) for a in alarms)
    assert walked["alarm actions"] == 2 * _count(template, "AWS::CloudWatch::Alarm") > 0
    assert walked["rule targets"] == sum(len(r["Properties"].get("Targets", [])) for r in template["Resources"].values()
                                         if r["Type"] == "AWS::Events::Rule") >= 3
    assert walked["custom resources"] >= len(load_config().get(environment).job_groups)  # a deploy per streaming job


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_the_walk_finds_that_no_alarm_of_1d225b0_could_notify_anyone(environment):
    """1d225b0's topic policy allowed EventBridge only: every alarm action fails the walk, and so do the deploy
    resources, which waited an hour for a dropped invocation."""
    template = json.loads(gzip.decompress((FIXTURES / f"{environment}.template.json.gz").read_bytes()))
    problems, walked = delivery_problems(template)
    alarm_problems = [p for p in problems if p.startswith("alarm ") and "cloudwatch.amazonaws.com to sns:Publish" in p]
    assert len(alarm_problems) == walked["alarm actions"] == 2 * _count(template, "AWS::CloudWatch::Alarm") > 20
    assert [p for p in problems if "after an hour" in p]


def test_no_key_policy_repeats_a_statement(templates):
    """1d225b0's topic key granted EventBridge twice (its own statement and the target's)."""
    for environment, template in templates.items():
        for key_id, key in template["Resources"].items():
            if key["Type"] != "AWS::KMS::Key":
                continue
            statements = [json.dumps({k: v for k, v in st.items() if k != "Sid"}, sort_keys=True)
                          for st in key["Properties"]["KeyPolicy"]["Statement"]]
            assert len(statements) == len(set(statements)), (environment, key_id)
