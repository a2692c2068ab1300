"""Network: created or imported VPC, private subnets per AZ, Glue security group, VPC endpoints."""

from __future__ import annotations

import dataclasses

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_s3 as s3

from infra.config import load_config
from infra.network import Network
from tests.infra.bare import bare_stack

INTERFACE_SERVICES = {"glue", "logs", "monitoring", "kms", "sts"}


def _build(network_settings, **stack_kwargs):
    stack = bare_stack("Network", **stack_kwargs)
    logs = s3.Bucket(stack, "Logs")
    network = Network(stack, "Network", settings=network_settings, flow_log_bucket=logs,
                      flow_log_prefix="vpc-flow-logs")
    return stack, network, assertions.Template.from_stack(stack)


@pytest.fixture(scope="module")
def prod():
    return _build(load_config().get("prod").network)


def _service(endpoint_props) -> str:
    # ServiceName is {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".glue"]]}
    return endpoint_props["ServiceName"]["Fn::Join"][1][-1].lstrip(".")


def test_created_vpc_spans_max_azs_with_private_subnets_nat_and_flow_logs(prod):
    stack, network, template = prod
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.42.0.0/16"})
    assert len(network.private_subnets) == 3  # max_azs 3, even in an environment-agnostic stack
    template.resource_count_is("AWS::EC2::NatGateway", 3)
    private = [p["Properties"] for p in template.find_resources("AWS::EC2::Subnet").values()
               if not p["Properties"]["MapPublicIpOnLaunch"]]
    assert [p["AvailabilityZone"] for p in private] == [{"Fn::Select": [i, {"Fn::GetAZs": ""}]} for i in range(3)]
    template.has_resource_properties("AWS::EC2::FlowLog", {
        "LogDestinationType": "s3",
        "TrafficType": "ALL",
        "ResourceType": "VPC",
        "LogDestination": {"Fn::Join": ["", [{"Fn::GetAtt": [assertions.Match.any_value(), "Arn"]}, "/vpc-flow-logs/"]]},
    })


def test_glue_security_group_references_itself_on_all_tcp(prod):
    stack, network, template = prod
    sg_id = stack.get_logical_id(network.glue_security_group.node.default_child)
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "IpProtocol": "tcp", "FromPort": 0, "ToPort": 65535,
        "GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [sg_id, "GroupId"]},
    })


def test_endpoints_s3_gateway_and_interface_endpoints_open_to_glue_only(prod):
    stack, network, template = prod
    endpoints = [e["Properties"] for e in template.find_resources("AWS::EC2::VPCEndpoint").values()]
    gateway = [e for e in endpoints if e.get("VpcEndpointType") == "Gateway"]
    interface = [e for e in endpoints if e.get("VpcEndpointType") == "Interface"]
    assert [_service(e) for e in gateway] == ["s3"]
    assert len(gateway[0]["RouteTableIds"]) == 3  # the private route tables
    # No Kinesis endpoint: the Kinesis jobs have no connection, so they never run in this VPC.
    assert {_service(e) for e in interface} == INTERFACE_SERVICES
    endpoint_sg = {"Fn::GetAtt": [stack.get_logical_id(network.endpoint_security_group.node.default_child), "GroupId"]}
    assert all(e["PrivateDnsEnabled"] and e["SecurityGroupIds"] == [endpoint_sg] for e in interface)
    glue_sg = {"Fn::GetAtt": [stack.get_logical_id(network.glue_security_group.node.default_child), "GroupId"]}
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "GroupId": endpoint_sg, "SourceSecurityGroupId": glue_sg,
    })
    # no CIDR ingress on the endpoint security group (open=False)
    sg = template.to_json()["Resources"][endpoint_sg["Fn::GetAtt"][0]]["Properties"]
    assert "SecurityGroupIngress" not in sg


def test_existing_vpc_is_imported_without_lookup_and_gets_only_the_glue_security_group():
    settings = dataclasses.replace(
        load_config().get("dev").network, mode="existing", vpc_id="vpc-0123456789abcdef0", vpc_cidr=None,
        availability_zones=("eu-west-1a", "eu-west-1b"), private_subnet_ids=("subnet-0aaaaaaa", "subnet-0bbbbbbb"),
    )
    stack, network, template = _build(settings, env=cdk.Environment(account="111122223333", region="eu-west-1"))
    assert [s.subnet_id for s in network.private_subnets] == ["subnet-0aaaaaaa", "subnet-0bbbbbbb"]
    assert [s.availability_zone for s in network.private_subnets] == ["eu-west-1a", "eu-west-1b"]
    for absent in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::VPCEndpoint", "AWS::EC2::FlowLog", "AWS::EC2::NatGateway"):
        template.resource_count_is(absent, 0)
    template.has_resource_properties("AWS::EC2::SecurityGroup", {"VpcId": "vpc-0123456789abcdef0"})
