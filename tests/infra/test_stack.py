"""The composed stack per environment: the outputs operations tools read, and IAM wildcards."""

from __future__ import annotations

import json

import pytest

from devtools.template_sources import job_sources, source_arguments
from infra.config import load_config
from operations.resources import pascal

COMMON_OUTPUTS = {
    "LakeBucketName", "DeadLetterBucketName", "CheckpointBucketName", "JobAssetsBucketName", "AccessLogBucketName",
    "DataKeyArn", "CatalogDatabaseName", "LakeTableName", "SchemaRegistryName",
    "EventSchemaName",
}
PER_SOURCE = ("DeadLetterTableName", "DeadLetterPath", "CheckpointPath")  # a routed source's dead-letter tables: below
PER_DATASET = ("SchemaName", "LakeTableName", "LakePath")
# Actions a `*` resource is allowed for, because AWS offers nothing narrower for them (the code next to
# each such statement says so too). Anything else with `*` fails.
WILDCARD_ONLY_ACTIONS = {
    "cloudwatch:PutMetricData",  # no resource-level permissions; narrowed by a namespace condition
    # Looked up by SchemaVersionId, which names no registry or schema: AWS's deserializer example grants it on *.
    "glue:GetSchemaVersion",
    # Glue's connection: these Describe calls support no resource-level permissions (ENI create/delete and
    # DescribeVpcAttribute are scoped).
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
    "ec2:DescribeVpcEndpoints", "ec2:DescribeRouteTables",
    # The job keeper lists the jobs that may hold a job's checkpoint before it starts it (no resource type).
    "glue:GetJobs",
}
MSK_OUTPUTS = {"VpcId", "GlueSecurityGroupId", "MskClusterArn", "MskClusterName", "MskBootstrapServers", "MskTopicName", "GlueKafkaConnectionName",
               "KafkaProducerPolicyArn"}


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_outputs_name_everything_an_operations_tool_needs(templates, environment):
    config = load_config().get(environment)
    expected = set(COMMON_OUTPUTS)
    # A Kinesis source's job reads its stream through a catalog table; a Kafka job reads the topic (docs/kafka.md).
    # Keys end in the PascalCase name (operations/resources.py): page_views -> PageViews.
    expected |= {f"{key}{pascal(s.name)}" for key in ("KinesisStreamName", "SourceTableName") for s in config.kinesis_streams}
    expected |= {f"{key}{pascal(s)}" for key in PER_SOURCE for s in config.source_names if s not in config.routes}
    # A routed source (dev's events) has no dead-letter table of its own: one per dataset it routes, and its unroutable.
    expected |= {f"{key}{pascal(s)}" for key in PER_SOURCE[1:] for s in config.routes}
    expected |= {f"DeadLetterTableName{pascal(s)}{part}" for s in config.routes
                 for part in [*(pascal(d) for d in config.carried[s]), "Unroutable"]}
    expected |= {f"StreamingJobName{pascal(s)}" for s in config.source_names}
    expected |= {f"{key}{pascal(d)}" for key in PER_DATASET for d in config.datasets}
    expected |= {"CompactionJobName", "AlarmTopicArn", "ReadersWorkGroupName", "AthenaResultsBucketName"}
    expected |= {f"ReaderPolicyArn{pascal(d)}" for d in config.datasets}  # docs/readers.md
    if config.msk.enabled:
        expected |= MSK_OUTPUTS
    outputs = templates[environment]["Outputs"]
    assert set(outputs) == expected
    assert outputs["CatalogDatabaseName"]["Value"] == f"streamlake_{environment}"
    assert outputs["EventSchemaName"]["Value"] == "com.streamlake.events.Event"


def test_outputs_agree_with_the_keys_the_tools_read(templates):
    from operations import resources

    prod = load_config().get("prod")
    keys = resources.required_output_keys(prod.source_names, tuple(s.name for s in prod.kinesis_streams), prod.datasets)
    assert set(keys) <= set(templates["prod"]["Outputs"])


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_identity_policies_use_wildcard_resources_only_where_aws_allows_nothing_narrower(templates, environment):
    """Outside KMS key policies (where `*` means "this key"), `*` is allowed only for WILDCARD_ONLY_ACTIONS."""
    offenders = []
    for logical_id, resource in templates[environment]["Resources"].items():
        props = resource.get("Properties", {})
        documents = []
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents = [props["PolicyDocument"]]
        elif resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in props.get("Policies", [])]
        for document in documents:
            for statement in document["Statement"]:
                resources = statement.get("Resource", [])
                actions = statement.get("Action", [])
                actions = actions if isinstance(actions, list) else [actions]
                if "*" in (resources if isinstance(resources, list) else [resources]) and not set(actions) <= WILDCARD_ONLY_ACTIONS:
                    offenders.append((logical_id, actions))
    assert offenders == [], json.dumps(offenders)


# Names that are unique only inside a retained parent that is itself named per stack instance.
SCOPED_NAMES = {"AWS::Glue::Schema": "inside its registry", "AWS::MSK::Topic": "inside its cluster"}
# Names the schemas' create-only list does not reach: CDK writes a database's name into DatabaseInput.Name.
EXTRA_NAME_PATHS = {"AWS::Glue::Database": (("DatabaseInput", "Name"),)}


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_no_retained_resource_keeps_a_fixed_name(templates, environment):
    """A resource kept on stack delete still holds its name, so a fixed name would make creating the
    environment again fail: every retained resource's name (a create-only property ending in Name, from
    the CloudFormation resource schemas) is generated or ends in the stack instance suffix."""
    from devtools import cfn_schema

    fixed = []
    for logical_id, resource in templates[environment]["Resources"].items():
        if resource.get("DeletionPolicy") != "Retain" or resource["Type"] in SCOPED_NAMES:
            continue
        for path in cfn_schema.name_paths(resource["Type"]) + EXTRA_NAME_PATHS.get(resource["Type"], ()):
            value = resource.get("Properties", {})
            for step in path:
                value = value.get(step) if isinstance(value, dict) else None
            if isinstance(value, str):
                fixed.append(f"{logical_id} ({resource['Type']}) {'.'.join(path)}={value}")
            elif value is not None:
                # the stack instance suffix, or a resource name CloudFormation generates (a Ref to a resource
                # the template does not name, like CDK's provider Lambda behind its managed log group)
                text = json.dumps(value)
                refs = [ref for ref in templates[environment]["Resources"] if f'"Ref": "{ref}"' in text]
                generated = refs and all(
                    not any(k.endswith("Name") for k in templates[environment]["Resources"][ref].get("Properties", {}))
                    for ref in refs)
                assert '"AWS::StackId"' in text or generated, (logical_id, value)
    assert fixed == []


def test_kafka_jobs_get_their_partitions_and_min_partitions_from_the_config(templates):
    """prod: one job subscribes to the 12-partition topic and asks Spark for 36 partitions (9 G.1X executors x 4
    vCPUs, msk.min_partitions "auto"); the topic is created with the config's compression and retention."""
    resources = templates["prod"]["Resources"].values()
    (job,) = [r["Properties"]["DefaultArguments"] for r in resources if r["Type"] == "AWS::Glue::Job"
              and "--sources" in r["Properties"]["DefaultArguments"]
              and any(s["source_type"] == "kafka" for s in job_sources(r["Properties"]["DefaultArguments"]))]
    (args,) = source_arguments(job)
    assert (args["--partitions"], args["--min_partitions"], args["--topic"]) == ("all", "36", "orders-events")
    (topic,) = [r["Properties"] for r in resources if r["Type"] == "AWS::MSK::Topic"]
    assert json.loads(topic["Configs"]["Fn::Base64"]) == {"compression.type": "zstd", "retention.ms": str(168 * 3_600_000)}
