"""Architecture pictures: nodes for the resources a reviewer cares about, edges from references."""

from __future__ import annotations

from devtools import diagram

TEMPLATE = {
    "Resources": {
        "Stream1": {"Type": "AWS::Kinesis::Stream", "Properties": {"StreamEncryption": {"KeyId": {"Fn::GetAtt": ["Key1", "Arn"]}}},
                    "Metadata": {"aws:cdk:path": "dev/StreamingLake/Streams/clickstream/Resource"}},
        "Key1": {"Type": "AWS::KMS::Key", "Properties": {}},
        "Job1": {"Type": "AWS::Glue::Job", "Properties": {"Role": {"Fn::GetAtt": ["Role1", "Arn"]}},
                 "Metadata": {"aws:cdk:path": "dev/StreamingLake/Streaming/clickstream/Job/Resource"}},
        "Role1": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Policy1": {"Type": "AWS::IAM::Policy", "Properties": {
            "Roles": [{"Ref": "Role1"}],
            "PolicyDocument": {"Statement": [{"Resource": {"Fn::GetAtt": ["Stream1", "Arn"]}}]}}},
    }
}


def test_graph_keeps_shown_types_and_folds_policies_into_access_edges():
    nodes, edges = diagram.graph(TEMPLATE)
    assert {k: v["label"] for k, v in nodes.items()} == {
        "Stream1": "Kinesis stream: Streams/clickstream",
        "Key1": "KMS key: Key1",
        "Job1": "Glue job: clickstream/Job",
    }
    assert edges == {("Stream1", "Key1", "uses"), ("Job1", "Stream1", "can access")}


def test_mermaid_and_dot_outputs_name_every_node_and_edge():
    mermaid = diagram.to_mermaid("dev", TEMPLATE)
    assert "flowchart LR" in mermaid and 'Job1["Glue job: clickstream/Job"]' in mermaid
    assert "Job1 -->|can access| Stream1" in mermaid
    dot = diagram.to_dot("dev", TEMPLATE)
    assert '"Job1" -> "Stream1" [label="can access"];' in dot and dot.startswith('digraph "dev" {')


def test_real_templates_produce_a_picture(templates):
    for env, template in templates.items():
        nodes, _ = diagram.graph(template)
        assert nodes, f"{env}: no resource of a shown type"


def test_committed_pictures_are_current(templates):
    for env, template in templates.items():
        committed = (diagram.OUT_DIR / f"{env}.md").read_text()
        assert committed == diagram.to_mermaid(env, template), f"docs/architecture/{env}.md is stale: run `make snapshots`"
