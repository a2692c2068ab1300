"""MSK: provisioned / serverless / existing cluster, IAM auth over TLS, topic, Glue KAFKA connection."""

from __future__ import annotations

import dataclasses

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms

from infra.config import load_config
from infra.msk import KafkaSourceInfrastructure, broker_server_properties, producer_policy
from tests.infra.bare import bare_stack, instance_named

EXISTING_ARN = "arn:aws:kafka:eu-west-1:111122223333:cluster/shared-kafka/0a1b2c3d-4e5f-6789-abcd-ef0123456789-2"


def _build(**overrides):
    settings = dataclasses.replace(load_config().get("prod").msk, **overrides)
    stack = bare_stack("Msk")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    glue_sg = ec2.SecurityGroup(stack, "GlueSg", vpc=vpc)
    key = kms.Key(stack, "DataKey", enable_key_rotation=True)
    msk = KafkaSourceInfrastructure(
        stack, "Msk", project="streamlake", environment="prod", settings=settings, vpc=vpc,
        subnets=list(vpc.private_subnets), client_security_group=glue_sg, encryption_key=key,
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    ids = {"key": stack.get_logical_id(key.node.default_child), "glue_sg": stack.get_logical_id(glue_sg.node.default_child),
           "subnets": [stack.get_logical_id(s.node.default_child) for s in vpc.private_subnets]}
    return stack, msk, assertions.Template.from_stack(stack), ids


@pytest.fixture(scope="module")
def provisioned():
    return _build(broker_count=2)


def _only(template, type_) -> dict:
    (resource,) = template.find_resources(type_).values()
    return resource


def _kafka_connection(template) -> dict:
    connections = [c["Properties"]["ConnectionInput"] for c in template.find_resources("AWS::Glue::Connection").values()]
    (connection,) = [c for c in connections if c["ConnectionType"] == "KAFKA"]
    return connection


def test_provisioned_cluster_tls_iam_encrypted_logged_across_private_subnets(provisioned):
    stack, msk, template, ids = provisioned
    cluster = _only(template, "AWS::MSK::Cluster")
    props = cluster["Properties"]
    assert cluster["DeletionPolicy"] == "Retain"
    assert props["ClusterName"] == instance_named("streamlake-prod")
    assert props["KafkaVersion"] == "3.8.x"
    assert props["NumberOfBrokerNodes"] == 2
    assert props["BrokerNodeGroupInfo"] == {
        "ClientSubnets": [{"Ref": s} for s in ids["subnets"]],
        "InstanceType": "kafka.m7g.large",
        "SecurityGroups": [{"Fn::GetAtt": [stack.get_logical_id(msk.broker_security_group.node.default_child), "GroupId"]}],
        "StorageInfo": {"EBSStorageInfo": {"VolumeSize": 500}},
    }
    assert props["ClientAuthentication"] == {"Sasl": {"Iam": {"Enabled": True}}, "Unauthenticated": {"Enabled": False}}
    assert props["EncryptionInfo"] == {
        "EncryptionAtRest": {"DataVolumeKMSKeyId": {"Fn::GetAtt": [ids["key"], "Arn"]}},
        "EncryptionInTransit": {"ClientBroker": "TLS", "InCluster": True},
    }
    assert props["EnhancedMonitoring"] == "DEFAULT"
    log_group_id = stack.get_logical_id(msk.log_group.node.default_child)
    assert props["LoggingInfo"] == {"BrokerLogs": {"CloudWatchLogs": {"Enabled": True, "LogGroup": {"Ref": log_group_id}}}}
    assert template.find_resources("AWS::Logs::LogGroup")[log_group_id]["Properties"] == {
        "KmsKeyId": {"Fn::GetAtt": [ids["key"], "Arn"]}, "LogGroupName": instance_named("/aws/msk/streamlake-prod"), "RetentionInDays": 30,
    }


def test_broker_configuration_disables_auto_create_and_sizes_replication():
    settings = dataclasses.replace(load_config().get("prod").msk, broker_count=3, topic_partitions=12)
    assert broker_server_properties(settings) == (
        "auto.create.topics.enable=false\ndefault.replication.factor=3\nmin.insync.replicas=2\n"
        "num.partitions=12\nunclean.leader.election.enable=false\n"
    )
    two = dataclasses.replace(settings, broker_count=2)
    assert "default.replication.factor=2\nmin.insync.replicas=1\n" in broker_server_properties(two)


def test_topic_exists_in_the_stack_before_the_connection_can_be_used(provisioned):
    stack, msk, template, _ = provisioned
    topic = _only(template, "AWS::MSK::Topic")
    assert topic["Properties"] == {
        "ClusterArn": {"Fn::GetAtt": [stack.get_logical_id(msk.cluster), "Arn"]},
        "TopicName": "orders-events", "PartitionCount": 12, "ReplicationFactor": 2,
        # msk.topic_compression_type and topic_retention_hours (168 h), as topic-level Kafka configs
        "Configs": {"Fn::Base64": '{"compression.type":"zstd","retention.ms":"604800000"}'},
    }
    lookup = _only(template, "Custom::AWS")
    assert stack.get_logical_id(msk.topic) in lookup["DependsOn"]


def test_only_glue_workers_reach_the_brokers_on_the_iam_tls_port(provisioned):
    stack, msk, template, ids = provisioned
    broker_sg = stack.get_logical_id(msk.broker_security_group.node.default_child)
    ingress = [r["Properties"] for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()
               if r["Properties"]["GroupId"] == {"Fn::GetAtt": [broker_sg, "GroupId"]}]
    assert ingress == [{
        "Description": "Kafka SASL/IAM over TLS from Glue workers", "FromPort": 9098, "ToPort": 9098, "IpProtocol": "tcp",
        "GroupId": {"Fn::GetAtt": [broker_sg, "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [ids["glue_sg"], "GroupId"]},
    }]


def test_bootstrap_brokers_come_from_get_bootstrap_brokers_scoped_to_the_cluster(provisioned):
    stack, msk, template, ids = provisioned
    cluster_arn = {"Fn::GetAtt": [stack.get_logical_id(msk.cluster), "Arn"]}
    policies = [p["Properties"]["PolicyDocument"]["Statement"] for p in template.find_resources("AWS::IAM::Policy").values()]
    assert policies == [[{"Action": "kafka:GetBootstrapBrokers", "Effect": "Allow", "Resource": cluster_arn}]]
    create = _only(template, "Custom::AWS")["Properties"]["Create"]["Fn::Join"][1][0]
    assert '"action":"getBootstrapBrokers","service":"Kafka","outputPaths":["BootstrapBrokerStringSaslIam"]' in create


def test_glue_kafka_connection_uses_iam_over_tls_in_a_private_subnet(provisioned):
    stack, msk, template, ids = provisioned
    lookup_id = [k for k in template.find_resources("Custom::AWS")][0]
    assert _kafka_connection(template) == {
        "ConnectionProperties": {
            "KAFKA_BOOTSTRAP_SERVERS": {"Fn::GetAtt": [lookup_id, "BootstrapBrokerStringSaslIam"]},
            "KAFKA_SSL_ENABLED": "true",
            "KAFKA_SASL_MECHANISM": "AWS_MSK_IAM",
        },
        "ConnectionType": "KAFKA",
        "Description": "MSK (provisioned) with IAM auth for the orders streaming job",
        "Name": "streamlake-prod-orders-kafka",
        "PhysicalConnectionRequirements": {
            "AvailabilityZone": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
            "SecurityGroupIdList": [{"Fn::GetAtt": [ids["glue_sg"], "GroupId"]}],
            "SubnetId": {"Ref": ids["subnets"][0]},
        },
    }


def test_every_further_private_subnet_gets_a_failover_network_connection(provisioned):
    """A job's first usable connection decides its AZ; one connection per subnet keeps the job off a single AZ."""
    stack, msk, template, ids = provisioned
    connections = {c["Properties"]["ConnectionInput"]["Name"]: c["Properties"]["ConnectionInput"]
                   for c in template.find_resources("AWS::Glue::Connection").values()}
    network = connections["streamlake-prod-orders-network-1"]
    assert network["ConnectionType"] == "NETWORK"
    assert network["PhysicalConnectionRequirements"] == {
        "AvailabilityZone": {"Fn::Select": [1, {"Fn::GetAZs": ""}]},
        "SecurityGroupIdList": [{"Fn::GetAtt": [ids["glue_sg"], "GroupId"]}],
        "SubnetId": {"Ref": ids["subnets"][1]},
    }
    assert len(connections) == len(ids["subnets"]) == 2
    assert [c.connection_name for c in msk.job_connections][0] == msk.connection_name
    assert len(msk.connection_subnet_ids) == 2


def test_serverless_cluster_uses_iam_and_the_private_subnets():
    stack, msk, template, ids = _build(mode="serverless")
    props = _only(template, "AWS::MSK::ServerlessCluster")["Properties"]
    assert props == {
        "ClusterName": instance_named("streamlake-prod"),
        "ClientAuthentication": {"Sasl": {"Iam": {"Enabled": True}}},
        "VpcConfigs": [{
            "SubnetIds": [{"Ref": s} for s in ids["subnets"]],
            "SecurityGroups": [{"Fn::GetAtt": [stack.get_logical_id(msk.broker_security_group.node.default_child), "GroupId"]}],
        }],
    }
    template.resource_count_is("AWS::MSK::Topic", 0)  # no AWS::MSK::Topic for serverless: see docs
    template.resource_count_is("Custom::AWS", 1)


def test_existing_cluster_takes_arn_and_bootstrap_from_config():
    stack, msk, template, _ = _build(mode="existing", cluster_arn=EXISTING_ARN, bootstrap_servers="b-1.kafka.example:9098,b-2.kafka.example:9098")
    for absent in ("AWS::MSK::Cluster", "AWS::MSK::ServerlessCluster", "AWS::MSK::Topic", "Custom::AWS"):
        template.resource_count_is(absent, 0)
    assert (msk.cluster_arn, msk.cluster_name) == (EXISTING_ARN, "shared-kafka")
    props = _kafka_connection(template)["ConnectionProperties"]
    assert props["KAFKA_BOOTSTRAP_SERVERS"] == "b-1.kafka.example:9098,b-2.kafka.example:9098"


def test_mode_none_builds_nothing():
    with pytest.raises(ValueError, match="msk.mode is 'none'"):
        _build(mode="none")


def test_log_key_policy_lets_cloudwatch_logs_use_the_key_for_the_broker_log_group_only(provisioned):
    _, _, template, ids = provisioned
    statements = template.to_json()["Resources"][ids["key"]]["Properties"]["KeyPolicy"]["Statement"]
    logs = [s for s in statements if "Service" in s["Principal"]]
    assert len(logs) == 1
    arn = logs[0]["Condition"]["ArnEquals"]["kms:EncryptionContext:aws:logs:arn"]["Fn::Join"][1]
    assert arn[-2:] == [":log-group:", instance_named("/aws/msk/streamlake-prod")]


def test_producer_policy_writes_only_its_topic_idempotently_and_reads_only_its_schema():
    """MSK "Semantics of IAM authorization policy actions and resources": Connect and WriteDataIdempotently take the
    cluster, DescribeTopic and WriteData the topic; no read, no group, no other topic."""
    stack = bare_stack("Producer")
    registry = "arn:aws:glue:eu-west-1:111122223333:registry/streamlake-prod"
    schema = "arn:aws:glue:eu-west-1:111122223333:schema/streamlake-prod/com.streamlake.orders.Order"
    producer_policy(stack, "Producer", cluster_arn=EXISTING_ARN, topic="orders-events", registry_arn=registry,
                    schema_arns=[schema])
    document = stack.resolve(_only(assertions.Template.from_stack(stack), "AWS::IAM::ManagedPolicy")["Properties"]["PolicyDocument"])
    statements = {s["Sid"]: (s["Action"], s["Resource"]) for s in document["Statement"]}
    topic = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":kafka:", {"Ref": "AWS::Region"}, ":",
                               {"Ref": "AWS::AccountId"}, ":topic/shared-kafka/0a1b2c3d-4e5f-6789-abcd-ef0123456789-2/orders-events"]]}
    assert statements == {
        "ConnectIdempotently": (["kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"], EXISTING_ARN),
        "WriteTopic": (["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"], topic),
        "NewestSchemaVersion": ("glue:GetSchemaVersion", [registry, schema]),
    }
