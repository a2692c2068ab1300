"""Offline IAM policy lint (devtools/iam_lint.py, parliament pinned in requirements-dev.txt) of every synthesized
policy: no finding outside ACKNOWLEDGED, the linter and the renderer really work, no acknowledgement is stale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools import iam_lint
from infra.config import load_config

ENVIRONMENTS = list(load_config().environments)


@pytest.fixture(scope="module")
def results(templates) -> dict[str, iam_lint.LintResult]:
    return {env: iam_lint.lint_template(templates[env]) for env in ENVIRONMENTS}


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_policy_has_only_acknowledged_findings(results, environment):
    result = results[environment]
    assert result.policies, f"{environment}: no policy extracted"
    assert result.unacknowledged == [], f"{environment}: unacknowledged IAM lint findings:\n" + "\n".join(
        str(f) for f in result.unacknowledged
    )


def test_every_acknowledgement_is_still_used(results):
    used = {id(ack) for result in results.values() for _, ack in result.acknowledged}
    stale = [f"{ack.issue} {ack.policy or 'Sid ' + str(ack.sid)}" for ack in iam_lint.ACKNOWLEDGED if id(ack) not in used]
    assert stale == [], f"acknowledgements no finding uses any more (remove them): {stale}"


def test_extracts_identity_trust_and_resource_policies(results):
    kinds = {(p.resource_type, p.kind) for result in results.values() for p in result.policies}
    assert {
        ("AWS::IAM::Policy", "identity"), ("AWS::IAM::Role", "trust"), ("AWS::S3::BucketPolicy", "resource"),
        ("AWS::SNS::TopicPolicy", "resource"), ("AWS::KMS::Key", "resource"),
    } <= kinds


def test_committed_snapshots_lint_like_the_synthesized_templates(results):
    """`python -m devtools.iam_lint` reads the snapshots; they must give the same findings as the synth."""
    from devtools.snapshot import snapshot_path

    for env in ENVIRONMENTS:
        snapshot = json.loads(Path(snapshot_path(env)).read_text(encoding="utf-8"))
        assert sorted(map(str, iam_lint.lint_template(snapshot).findings)) == sorted(map(str, results[env].findings)), env


# --- the linter fires ---------------------------------------------------------------------------------------


def _policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def _issues(document: dict, kind: str = "identity") -> set[str]:
    return {f.issue for f in iam_lint.lint_document(document, "Test", kind)}


def test_unknown_action_is_a_finding():
    findings = iam_lint.lint_document(
        _policy({"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "arn:aws:s3:::bucket/*"}), "Test"
    )
    assert [(f.issue, f.policy, f.statement) for f in findings] == [("UNKNOWN_ACTION", "Test", 0)]
    assert "s3:GetObjekt" in findings[0].detail


def test_resource_of_the_wrong_type_is_a_finding():
    # GetObject acts on objects (bucket/key), not on the bucket ARN
    findings = iam_lint.lint_document(
        _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::bucket"}), "Test"
    )
    assert [f.issue for f in findings] == ["RESOURCE_MISMATCH"]
    assert findings[0].actions == ("s3:getobject",)


def test_well_scoped_policy_has_no_finding():
    assert _issues(_policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::bucket/*"})) == set()


def test_trust_policy_open_to_everyone_is_a_finding():
    trust = _policy({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole",
                     "Resource": "arn:aws:iam::111122223333:role/r"})
    assert "TRUST_POLICY_PRINCIPAL_STAR" in _issues(trust, "trust")


def test_new_template_finding_is_unacknowledged():
    template = {"Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket"},
        "Policy": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyName": "Policy", "PolicyDocument": _policy(
            {"Effect": "Allow", "Action": "s3:PutObject", "Resource": {"Fn::GetAtt": ["Bucket", "Arn"]}},
        )}},
    }}
    result = iam_lint.lint_template(template)
    assert [(f.issue, f.policy) for f in result.unacknowledged] == [("RESOURCE_MISMATCH", "Policy")]


def test_acknowledgement_matches_only_its_actions():
    ack = iam_lint.Acknowledgement("RESOURCE_MISMATCH", "reason", policy="P*", actions={"kinesis:ListStreams"})
    finding = iam_lint.Finding("RESOURCE_MISMATCH", "MEDIUM", "Pol", None, 0, "", ("kinesis:liststreams",))
    assert ack.matches(finding)
    assert not ack.matches(iam_lint.Finding("RESOURCE_MISMATCH", "MEDIUM", "Pol", None, 0, "",
                                            ("kinesis:liststreams", "kinesis:putrecord")))
    assert not ack.matches(iam_lint.Finding("RESOURCE_MISMATCH", "MEDIUM", "Other", None, 0, "", ("kinesis:liststreams",)))


# --- the renderer ---------------------------------------------------------------------------------------------

RESOURCES = {
    "LakeBucket": {"Type": "AWS::S3::Bucket"},
    "Cluster": {"Type": "AWS::MSK::Cluster"},
    "Key": {"Type": "AWS::KMS::Key"},
    "Subnet": {"Type": "AWS::EC2::Subnet"},
    "Fn": {"Type": "AWS::Lambda::Url"},
}


def test_join_of_getatt_renders_to_an_s3_object_arn():
    value = {"Fn::Join": ["", [{"Fn::GetAtt": ["LakeBucket", "Arn"]}, "/events/*"]]}
    assert iam_lint.render(value, RESOURCES) == "arn:aws:s3:::lakebucket/events/*"


def test_pseudo_parameters_sub_and_select_split_render():
    topic = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":kafka:", {"Ref": "AWS::Region"}, ":",
                               {"Ref": "AWS::AccountId"}, ":topic/",
                               {"Fn::Select": [1, {"Fn::Split": ["/", {"Fn::GetAtt": ["Cluster", "Arn"]}]}]}, "/",
                               {"Fn::Select": [2, {"Fn::Split": ["/", {"Fn::GetAtt": ["Cluster", "Arn"]}]}]}, "/t"]]}
    assert iam_lint.render(topic, RESOURCES) == (
        "arn:aws:kafka:us-east-1:111122223333:topic/cluster/11111111-2222-3333-4444-555555555555-1/t"
    )
    assert iam_lint.render({"Fn::Sub": "cdk-assets-${AWS::AccountId}-${AWS::Region}/${Key.Arn}/${!aws:username}"},
                           RESOURCES) == "cdk-assets-111122223333-us-east-1/arn:aws:kms:us-east-1:111122223333:key/key/${aws:username}"
    assert iam_lint.render({"Fn::Join": [":", [{"Ref": "Subnet"}, {"Fn::Select": [0, {"Fn::GetAZs": ""}]}]]},
                           RESOURCES) == "subnet-subnet:us-east-1a"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"Fn::ImportValue": "SharedBucketArn"}, "Fn::ImportValue"),
        ({"Fn::GetAtt": ["Fn", "FunctionUrl"]}, "AWS::Lambda::Url"),
        ({"Fn::GetAtt": ["LakeBucket", "WebsiteURL"]}, "WebsiteURL"),
        ({"Ref": "AWS::NotificationARNs"}, "AWS::NotificationARNs"),
        ({"Ref": "Missing"}, "Missing"),
    ],
)
def test_unknown_intrinsic_type_or_attribute_raises_naming_it(value, named):
    with pytest.raises(iam_lint.UnrenderableError, match=named):
        iam_lint.render({"Resource": [value]}, RESOURCES)


def test_unextracted_policy_document_raises():
    template = {"Resources": {"Queue": {"Type": "AWS::SQS::QueuePolicy", "Properties": {"PolicyDocument": _policy()}}}}
    with pytest.raises(iam_lint.UnrenderableError, match="AWS::SQS::QueuePolicy"):
        iam_lint.extract_policies(template)


def test_cli_reports_counts(capsys):
    code = iam_lint.main([])
    out = capsys.readouterr().out
    for env in ENVIRONMENTS:
        assert f"{env}: " in out and " policies, " in out
    assert code == (1 if "UNACKNOWLEDGED" in out else 0)
