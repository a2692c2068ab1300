"""The Kafka side: an MSK cluster (provisioned, serverless or an existing one), the topic, and the
Glue KAFKA connection the MSK streaming job uses.

- Auth is IAM everywhere (SASL/AWS_MSK_IAM over TLS, port 9098); no unauthenticated or plaintext access.
- Bootstrap brokers: AWS::MSK::Cluster and AWS::MSK::ServerlessCluster return only `Arn` from
  Fn::GetAtt (no broker string), so an AwsCustomResource calls kafka:GetBootstrapBrokers on the
  cluster ARN at deploy time and the connection takes `BootstrapBrokerStringSaslIam` from it.
- The topic: `provisioned` creates it in the stack with AWS::MSK::Topic (needs Kafka >= 3.6.0), so it
  exists before any job can start, and broker auto-creation is off (a mistyped producer topic fails
  instead of creating a stray topic). `serverless` and `existing` have no such resource here; the
  topic must be created before the job starts (docs/infrastructure.md "Topic creation").
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_msk as msk
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.config import MskConfig
from infra.job_iam import allow_cloudwatch_logs
from infra.nag import acknowledge
from infra.naming import retained_name

IAM_TLS_PORT = 9098  # SASL/IAM over TLS from inside the VPC
MAX_REPLICATION_FACTOR = 3
LAMBDA_BASIC_EXECUTION = "service-role/AWSLambdaBasicExecutionRole"


def replication_factor(broker_count: int) -> int:
    return min(MAX_REPLICATION_FACTOR, broker_count)


def kafka_arn(stack: cdk.Stack, cluster_arn: str, kind: str, name: str) -> str:
    """The ARN of a topic or group (`kind`) of the cluster: arn:...:kafka:<region>:<account>:<kind>/<cluster name>/
    <cluster uuid>/<name>, built from the cluster's arn:...:cluster/<name>/<uuid> (MSK "Semantics of IAM
    authorization policy actions and resources", resources)."""
    cluster_name = cdk.Fn.select(1, cdk.Fn.split("/", cluster_arn))
    cluster_uuid = cdk.Fn.select(2, cdk.Fn.split("/", cluster_arn))
    return f"arn:{stack.partition}:kafka:{stack.region}:{stack.account}:{kind}/{cluster_name}/{cluster_uuid}/{name}"


def producer_policy(scope: Construct, id_: str, *, cluster_arn: str, topic: str, registry_arn: str,
                    schema_arns: list[str]) -> iam.ManagedPolicy:
    """What `python -m operations produce` (or any Schema Registry producer) needs to write the topic, for operators to
    attach to a producer's role. MSK "Semantics of IAM authorization policy actions and resources": Connect and
    WriteDataIdempotently take the cluster; WriteData needs Connect and DescribeTopic, on the topic. The producer looks
    the newest version up by registry and schema name (glue:GetSchemaVersion with a SchemaId), so the registry and
    each schema the topic carries (a routed topic: one per dataset) are its resources; unverified on AWS that IAM evaluates that call against the schema ARN (the job's
    lookups by version id name no schema and need "*", see infra/streaming_job.py)."""
    stack = cdk.Stack.of(scope)
    return iam.ManagedPolicy(
        scope,
        id_,
        description=f"produce to MSK topic {topic} (idempotent) with its Schema Registry schema",
        statements=[
            iam.PolicyStatement(sid="ConnectIdempotently",
                                actions=["kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"],
                                resources=[cluster_arn]),
            iam.PolicyStatement(sid="WriteTopic", actions=["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"],
                                resources=[kafka_arn(stack, cluster_arn, "topic", topic)]),
            iam.PolicyStatement(sid="NewestSchemaVersion", actions=["glue:GetSchemaVersion"],
                                resources=[registry_arn, *schema_arns]),
        ],
    )


def broker_server_properties(settings: MskConfig) -> str:
    """server.properties of the provisioned cluster's MSK configuration."""
    rf = replication_factor(settings.broker_count)
    lines = [
        # Topics come from AWS::MSK::Topic only; see module docstring.
        "auto.create.topics.enable=false",
        f"default.replication.factor={rf}",
        # RF - 1 keeps producers with acks=all writing while one broker is patched (MSK best practice).
        f"min.insync.replicas={max(1, rf - 1)}",
        f"num.partitions={settings.topic_partitions}",
        "unclean.leader.election.enable=false",
    ]
    return "\n".join(lines) + "\n"


class KafkaSourceInfrastructure(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        project: str,
        environment: str,
        settings: MskConfig,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        client_security_group: ec2.ISecurityGroup,
        encryption_key: kms.IKey,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, id_)
        if not settings.enabled:
            raise ValueError("msk.mode is 'none': build no KafkaSourceInfrastructure")
        self.mode = settings.mode
        self.source_name = settings.source_name
        self.topic_name = settings.topic
        self.broker_security_group: ec2.SecurityGroup | None = None
        self.log_group: logs.LogGroup | None = None
        self.topic: msk.CfnTopic | None = None
        self.cluster: msk.CfnCluster | msk.CfnServerlessCluster | None = None
        name = f"{project}-{environment}"

        if settings.mode == "existing":
            self.cluster_arn: str = settings.cluster_arn
            # arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>
            self.cluster_name: str = settings.cluster_arn.split("/")[1]
            self.bootstrap_servers: str = settings.bootstrap_servers
        else:
            self.broker_security_group = ec2.SecurityGroup(
                self,
                "BrokerSecurityGroup",
                vpc=vpc,
                description="MSK brokers: SASL/IAM over TLS from allowed clients only",
                allow_all_outbound=False,
            )
            self.broker_security_group.add_ingress_rule(
                client_security_group, ec2.Port.tcp(IAM_TLS_PORT), "Kafka SASL/IAM over TLS from Glue workers"
            )
            subnet_ids = [s.subnet_id for s in subnets]
            if settings.mode == "provisioned":
                self._provisioned(name, settings, subnet_ids, encryption_key, removal_policy)
            else:
                self._serverless(name, subnet_ids, removal_policy)
            self.cluster_name = retained_name(name, removal_policy)
            self.cluster_arn = self.cluster.attr_arn
            self.bootstrap_servers = self._bootstrap_brokers()

        self.connection = glue.Connection(
            self,
            "GlueConnection",
            type=glue.ConnectionType.KAFKA,
            connection_name=f"{name}-{settings.source_name}-kafka",
            description=f"MSK ({settings.mode}) with IAM auth for the {settings.source_name} streaming job",
            properties={
                "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers,
                "KAFKA_SSL_ENABLED": "true",
                "KAFKA_SASL_MECHANISM": "AWS_MSK_IAM",
            },
            security_groups=[client_security_group],
            # A Glue connection names one subnet; its AZ comes from the subnet.
            network=glue.ConnectionNetwork.subnet(subnets[0]),
        )
        self.connection_name = self.connection.connection_name
        # One AZ would be a single point of failure while the brokers span two or three. A job may list
        # several connections: "Glue checks connections with network configurations in the order they're
        # listed until it finds a suitable one" (subnet valid, free IPs, AZ healthy), and a retried run
        # after an AZ failure picks another AZ (re:Post article "AWS Glue job networking: managing
        # multiple connections", repost.aws/articles/ARTT49mVccTzuA9bQ2UUQq2g). So the job lists the KAFKA
        # connection (first subnet; the catalog table names it, and its bootstrap servers reach brokers
        # in every AZ) and then one NETWORK connection per further subnet, in AZ order.
        self.network_connections: list[glue.Connection] = [
            glue.Connection(
                self,
                f"GlueNetworkConnection{index}",
                type=glue.ConnectionType.NETWORK,
                connection_name=f"{name}-{settings.source_name}-network-{index}",
                description=f"Failover placement for the {settings.source_name} job (subnet {index + 1} of {len(subnets)})",
                security_groups=[client_security_group],
                network=glue.ConnectionNetwork.subnet(subnet),
            )
            for index, subnet in enumerate(subnets[1:], start=1)
        ]
        self.job_connections: tuple[glue.IConnection, ...] = (self.connection, *self.network_connections)
        # Where Glue may create the job's network interfaces (the job role's ENI grants name them).
        self.connection_subnet_ids: tuple[str, ...] = tuple(s.subnet_id for s in subnets)
        self.connection_security_group_ids: tuple[str, ...] = (client_security_group.security_group_id,)

    def _provisioned(
        self,
        name: str,
        settings: MskConfig,
        subnet_ids: list[str],
        encryption_key: kms.IKey,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        # Retained with the cluster, so named per stack instance where the environment retains (infra/naming.py).
        log_group_name = retained_name(f"/aws/msk/{name}", removal_policy)
        # Broker logs are encrypted with the data key; CloudWatch Logs may use it for this group only.
        allow_cloudwatch_logs(encryption_key, log_group_name)
        self.log_group = logs.LogGroup(
            self,
            "BrokerLogs",
            log_group_name=log_group_name,
            encryption_key=encryption_key,
            removal_policy=removal_policy,
        )
        # RetentionDays is an enum of names in Python; the config holds days (validated against the
        # values CloudWatch Logs accepts), so set the CloudFormation property directly.
        self.log_group.node.default_child.add_property_override(
            "RetentionInDays", settings.broker_log_retention_days
        )
        configuration = msk.CfnConfiguration(
            self,
            "BrokerConfiguration",
            # KafkaVersionsList and Name are create-only (AWS::MSK::Configuration resource schema): a new Kafka
            # version replaces the configuration, and the replacement must have a name of its own, or
            # CloudFormation cannot create it beside the one it replaces.
            name=retained_name(f"{name}-brokers-{settings.kafka_version.replace('.', '-')}", removal_policy),
            description="Topics from AWS::MSK::Topic only; replication sized to the broker count",
            kafka_versions_list=[settings.kafka_version],
            server_properties=broker_server_properties(settings),
        )
        # Kept with the retained cluster that uses it (a configuration in use cannot go before its cluster).
        configuration.apply_removal_policy(removal_policy)
        self.cluster = msk.CfnCluster(
            self,
            "Cluster",
            cluster_name=retained_name(name, removal_policy),
            kafka_version=settings.kafka_version,
            # MSK spreads brokers evenly over the client subnets (one per AZ); config validation
            # keeps broker_count a multiple of the AZ count.
            number_of_broker_nodes=settings.broker_count,
            broker_node_group_info=msk.CfnCluster.BrokerNodeGroupInfoProperty(
                client_subnets=subnet_ids,
                instance_type=settings.broker_instance_type,
                security_groups=[self.broker_security_group.security_group_id],
                storage_info=msk.CfnCluster.StorageInfoProperty(
                    ebs_storage_info=msk.CfnCluster.EBSStorageInfoProperty(volume_size=settings.broker_volume_gb)
                ),
            ),
            client_authentication=msk.CfnCluster.ClientAuthenticationProperty(
                sasl=msk.CfnCluster.SaslProperty(iam=msk.CfnCluster.IamProperty(enabled=True)),
                unauthenticated=msk.CfnCluster.UnauthenticatedProperty(enabled=False),
            ),
            encryption_info=msk.CfnCluster.EncryptionInfoProperty(
                encryption_at_rest=msk.CfnCluster.EncryptionAtRestProperty(data_volume_kms_key_id=encryption_key.key_arn),
                encryption_in_transit=msk.CfnCluster.EncryptionInTransitProperty(client_broker="TLS", in_cluster=True),
            ),
            # DEFAULT publishes KafkaDataLogsDiskUsed per broker, which the disk alarm watches.
            enhanced_monitoring="DEFAULT",
            logging_info=msk.CfnCluster.LoggingInfoProperty(
                broker_logs=msk.CfnCluster.BrokerLogsProperty(
                    cloud_watch_logs=msk.CfnCluster.CloudWatchLogsProperty(enabled=True, log_group=self.log_group.log_group_name)
                )
            ),
            configuration_info=msk.CfnCluster.ConfigurationInfoProperty(
                arn=configuration.attr_arn, revision=configuration.attr_latest_revision_revision
            ),
        )
        self.cluster.apply_removal_policy(removal_policy)
        self.topic = msk.CfnTopic(
            self,
            "Topic",
            cluster_arn=self.cluster.attr_arn,
            topic_name=settings.topic,
            partition_count=settings.topic_partitions,
            replication_factor=replication_factor(settings.broker_count),
            # "Topic configurations encoded as a Base64 string" (AWS::MSK::Topic, Configs; update: no interruption).
            # What the decoded string holds is not documented; a JSON object of string values is what the Terraform
            # and Pulumi aws_msk_topic resources pass for it: unverified on AWS. Fn::Base64 keeps the JSON readable
            # in the template and in `make diff`.
            configs=cdk.Fn.base64(json.dumps(settings.topic_configs, sort_keys=True, separators=(",", ":"))),
        )
        self.topic.apply_removal_policy(removal_policy)

    def _serverless(self, name: str, subnet_ids: list[str], removal_policy: cdk.RemovalPolicy) -> None:
        # Serverless encrypts at rest with an AWS-owned key and always requires TLS; IAM is its only auth.
        self.cluster = msk.CfnServerlessCluster(
            self,
            "Cluster",
            cluster_name=retained_name(name, removal_policy),
            client_authentication=msk.CfnServerlessCluster.ClientAuthenticationProperty(
                sasl=msk.CfnServerlessCluster.SaslProperty(iam=msk.CfnServerlessCluster.IamProperty(enabled=True))
            ),
            vpc_configs=[
                msk.CfnServerlessCluster.VpcConfigProperty(
                    subnet_ids=subnet_ids, security_groups=[self.broker_security_group.security_group_id]
                )
            ],
        )
        self.cluster.apply_removal_policy(removal_policy)

    def _bootstrap_brokers(self) -> str:
        call = cr.AwsSdkCall(
            service="Kafka",
            action="getBootstrapBrokers",
            parameters={"ClusterArn": self.cluster.attr_arn},
            physical_resource_id=cr.PhysicalResourceId.of(self.cluster.attr_arn),
            output_paths=["BootstrapBrokerStringSaslIam"],
        )
        lookup = cr.AwsCustomResource(
            self,
            "BootstrapBrokers",
            on_create=call,
            on_update=call,
            # kafka:GetBootstrapBrokers is scoped to this cluster's ARN.
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[self.cluster.attr_arn]),
            install_latest_aws_sdk=False,
        )
        # AwsCustomResource runs one Lambda per stack (a CDK singleton at the stack root).
        provider = cdk.Stack.of(self).node.find_child("AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", ""))
        acknowledge(
            provider,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{LAMBDA_BASIC_EXECUTION}]",
            "CDK's AwsCustomResource provider role; AWSLambdaBasicExecutionRole only lets the function write its "
            "own CloudWatch logs. Its kafka:GetBootstrapBrokers permission is a separate policy scoped to the cluster ARN.",
        )
        if self.topic is not None:
            # The connection (and so the job) is usable only once the topic exists.
            lookup.node.add_dependency(self.topic)
        return lookup.get_response_field("BootstrapBrokerStringSaslIam")
