"""Where the Glue workers that use a connection run: VPC, private subnets, security groups, endpoints.

Only the Kafka/MSK job is attached to a Glue connection (Glue places its ENIs in the connection's
subnet), so the stack builds this construct only when the environment has MSK; Kinesis jobs run in
Glue's own network and never use the VPC. The Kafka job still calls AWS APIs (S3, Glue, CloudWatch Logs
and metrics, KMS, STS; no Kinesis), so the created VPC gets an S3 gateway endpoint and interface
endpoints for those, reachable only from the Glue security group. The NAT gateway remains for
everything else (e.g. Glue's own service endpoints that have no VPC endpoint).

`mode: existing` imports the VPC with Vpc.from_vpc_attributes (no lookup, so synth needs no
credentials). The VPC's owner provides routing and endpoints there; this construct adds only the
Glue security group. See docs/infrastructure.md "Network".
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import NetworkConfig

PRIVATE_SUBNET_MASK = 20  # Glue uses one IP per worker ENI; a /20 leaves room for max_workers at any size
PUBLIC_SUBNET_MASK = 24  # NAT gateways only

# Interface endpoints a connection-attached Glue job needs (in addition to the S3 gateway endpoint).
INTERFACE_ENDPOINTS: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "Glue": ec2.InterfaceVpcEndpointAwsService.GLUE,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
}


class Network(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        settings: NetworkConfig,
        flow_log_bucket: s3.IBucket,
        flow_log_prefix: str,
    ) -> None:
        super().__init__(scope, id_)
        self.mode = settings.mode
        self.endpoints: dict[str, ec2.IVpcEndpoint] = {}
        if settings.mode == "existing":
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=settings.vpc_id,
                availability_zones=list(settings.availability_zones),
                private_subnet_ids=list(settings.private_subnet_ids),
                vpc_cidr_block=settings.vpc_cidr,
            )
        else:
            self.vpc = self._create_vpc(settings, flow_log_bucket, flow_log_prefix)
        self.private_subnets: list[ec2.ISubnet] = list(self.vpc.private_subnets)

        self.glue_security_group = ec2.SecurityGroup(
            self,
            "GlueSecurityGroup",
            vpc=self.vpc,
            description="Glue workers attached to the Kafka connection",
            allow_all_outbound=True,
        )
        # Glue requires a self-referencing rule: its workers talk to each other on any TCP port
        # (https://docs.aws.amazon.com/glue/latest/dg/setup-vpc-for-glue-access.html).
        self.glue_security_group.add_ingress_rule(
            self.glue_security_group, ec2.Port.all_tcp(), "Glue workers to each other (required by Glue)"
        )

        if settings.mode == "create":
            self._add_endpoints()

    def _create_vpc(self, settings: NetworkConfig, flow_log_bucket: s3.IBucket, flow_log_prefix: str) -> ec2.Vpc:
        stack = cdk.Stack.of(self)
        # An environment-agnostic stack only knows two AZs ({Fn::GetAZs} index 0 and 1); ask for
        # max_azs of them explicitly so a 3-AZ environment really spans 3 (MSK brokers per AZ).
        azs = None
        if cdk.Token.is_unresolved(stack.region):
            azs = [cdk.Fn.select(i, cdk.Fn.get_azs()) for i in range(settings.max_azs)]
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(settings.vpc_cidr),
            max_azs=None if azs else settings.max_azs,
            availability_zones=azs,
            nat_gateways=settings.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=PUBLIC_SUBNET_MASK),
                ec2.SubnetConfiguration(
                    name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=PRIVATE_SUBNET_MASK
                ),
            ],
            flow_logs={
                "All": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_s3(flow_log_bucket, f"{flow_log_prefix}/"),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
        )
        return vpc

    def _add_endpoints(self) -> None:
        self.endpoints["S3"] = self.vpc.add_gateway_endpoint(
            "S3Endpoint",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
        )
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="Interface endpoints: HTTPS from the Glue workers only",
            allow_all_outbound=False,
        )
        self.endpoint_security_group.add_ingress_rule(
            self.glue_security_group, ec2.Port.tcp(443), "HTTPS from Glue workers"
        )
        for name, service in INTERFACE_ENDPOINTS.items():
            self.endpoints[name] = self.vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                security_groups=[self.endpoint_security_group],
                open=False,
                private_dns_enabled=True,
            )
