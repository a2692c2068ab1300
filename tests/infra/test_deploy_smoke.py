"""Deploy smoke test: each environment's template is created in moto's CloudFormation (in process),
then the streams, buckets, Glue database and tables are found through boto3.

moto does not model every resource type. Those are named below, removed before create_stack, and
the test asserts the named set equals the unmodelled types actually present, so a new type cannot be
skipped silently. The Glue catalog resources are among them; the test creates those through the Glue
API from the template's own properties (intrinsics resolved against the created stack), so what is
found through boto3 is still exactly what the template declares.
"""

from __future__ import annotations

import copy
import json

import boto3
import pytest
from moto import mock_aws

from infra.config import load_config

REGION = "eu-west-1"
# Types moto's CloudFormation cannot create (moto 5.2.5), per environment that contains them.
UNMODELLED_BY_MOTO = {
    "AWS::Glue::Database",  # created below through the Glue API
    "AWS::Glue::Table",  # created below through the Glue API
    "AWS::Glue::Registry",  # created below through the Glue API
    "AWS::Glue::Schema",  # created below through the Glue API
    "AWS::Glue::SchemaVersion",  # registered below through the Glue API (versions after the first)
    "AWS::Glue::Connection",  # KAFKA connection: needs the MSK bootstrap brokers
    "AWS::MSK::Cluster",
    "AWS::MSK::Configuration",
    "AWS::MSK::Topic",
    "AWS::S3::BucketPolicy",
    "AWS::Glue::Job",
    "AWS::Glue::SecurityConfiguration",
    "AWS::Glue::Trigger",
    "AWS::CloudWatch::Alarm",
    "AWS::SNS::TopicPolicy",
    "AWS::SNS::Subscription",  # email subscriptions (prod)
    "Custom::AWS",  # would invoke the provider Lambda
    "Custom::VpcRestrictDefaultSG",  # would invoke the provider Lambda
    "Custom::StreamingJobDeploy",  # would invoke the job keeper (tests/ops/test_job_keeper.py runs its logic)
    "AWS::Athena::WorkGroup",  # the readers' workgroup: moto's Athena has the API, its CloudFormation no model
    "AWS::Athena::NamedQuery",  # the readers' saved queries (tests/infra/test_readers.py checks them in the template)
}
# Modelled resources that only exist to serve an unmodelled one and reference it, so they go too:
# the AwsCustomResource's policy names the MSK cluster ARN.
# The EventBridge rule names the Glue jobs and the dashboard lists the alarms; the job keeper's function names the
# Glue jobs in its environment, and its invoke permissions name the function.
REMOVED_WITH_UNMODELLED = {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::Events::Rule", "AWS::CloudWatch::Dashboard",
                           "AWS::Lambda::Function", "AWS::Lambda::Permission"}
GLUE_API_CREATED = ("AWS::Glue::Database", "AWS::Glue::Registry", "AWS::Glue::Schema", "AWS::Glue::SchemaVersion",
                    "AWS::Glue::Table")


def _modelled_types() -> set[str]:
    import moto.backends  # noqa: F401  (imports every service's CloudFormation models)
    from moto.cloudformation.parsing import get_model_map

    for name in moto.backends.list_of_moto_modules():
        try:
            moto.backends.get_backend(name)
        except Exception:  # noqa: BLE001 - a service without a backend has no models either
            pass
    return set(get_model_map())


def _strip(template: dict, drop: set[str]) -> tuple[dict, dict[str, dict]]:
    """Remove resources of the given types, the DependsOn on them and the outputs that read them."""
    t = copy.deepcopy(template)
    removed = {k: v for k, v in t["Resources"].items() if v["Type"] in drop}
    while True:  # resources whose properties reference a removed one, transitively
        refers = {k: v for k, v in t["Resources"].items() if k not in removed
                  and any(f'"{r}"' in json.dumps(v.get("Properties", {})) for r in removed)}
        if not refers:
            break
        removed.update(refers)
    for k in removed:
        del t["Resources"][k]
    for resource in t["Resources"].values():
        deps = resource.get("DependsOn")
        if deps:
            deps = [d for d in ([deps] if isinstance(deps, str) else deps) if d not in removed]
            resource["DependsOn"] = deps
            if not deps:
                del resource["DependsOn"]
    for key, output in list(t.get("Outputs", {}).items()):
        if any(f'"{k}"' in json.dumps(output) for k in removed):
            del t["Outputs"][key]
    return t, removed


def _adapt_for_moto(template: dict) -> None:
    """moto 5.2.5 quirks, each named:
    - its KMS model reads tags in the KMS API shape (TagKey/TagValue), not CloudFormation's Key/Value;
    - its flow-log model takes everything after `arn:aws:s3:::` as the bucket name, so a destination
      with a key prefix (valid in AWS) is not found: the prefix is dropped for moto only.
    """
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::EC2::FlowLog" and resource["Properties"].get("LogDestinationType") == "s3":
            join = resource["Properties"]["LogDestination"]["Fn::Join"]
            resource["Properties"]["LogDestination"] = join[1][0]  # {"Fn::GetAtt": [bucket, "Arn"]}
        if resource["Type"] == "AWS::KMS::Key" and "Tags" in resource["Properties"]:
            resource["Properties"]["Tags"] = [
                {"TagKey": t["Key"], "TagValue": t["Value"]} for t in resource["Properties"]["Tags"]
            ]


def _lambda_code(template: dict) -> set[tuple[str, str]]:
    found = set()
    for r in template["Resources"].values():
        if r["Type"] == "AWS::Lambda::Function" and "S3Key" in r["Properties"].get("Code", {}):
            found.add(r["Properties"]["Code"]["S3Key"])
    return found


class _Resolver:
    """Resolves the intrinsics the catalog resources use against the created stack."""

    def __init__(self, account: str, stack_id: str, physical: dict[str, str], removed: dict[str, dict]) -> None:
        self.pseudo = {"AWS::AccountId": account, "AWS::Region": REGION, "AWS::URLSuffix": "amazonaws.com",
                       "AWS::Partition": "aws", "AWS::StackId": stack_id}
        self.physical = physical
        self.removed = removed
        self.kinesis = boto3.client("kinesis", region_name=REGION)
        self.glue = boto3.client("glue", region_name=REGION)

    def __call__(self, value):
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            ref = value["Ref"]
            if ref in self.pseudo:
                return self.pseudo[ref]
            if ref in self.removed:  # Glue resources: Ref is the name
                props = self.removed[ref]["Properties"]
                return self((props.get("DatabaseInput") or props.get("ConnectionInput") or props)["Name"])
            return self.physical[ref]
        if set(value) == {"Fn::GetAtt"}:
            logical, attribute = value["Fn::GetAtt"]
            if attribute == "Arn" and logical in self.removed and self.removed[logical]["Type"] == "AWS::Glue::Registry":
                name = self(self.removed[logical]["Properties"]["Name"])
                return self.glue.get_registry(RegistryId={"RegistryName": name})["RegistryArn"]
            if attribute == "Arn" and logical in self.removed and self.removed[logical]["Type"] == "AWS::Glue::Schema":
                props = self.removed[logical]["Properties"]
                (registry,) = [self(r["Properties"]["Name"]) for r in self.removed.values()
                               if r["Type"] == "AWS::Glue::Registry"]
                return self.glue.get_schema(SchemaId={"RegistryName": registry, "SchemaName": props["Name"]})["SchemaArn"]
            assert attribute == "Arn", value
            return self.kinesis.describe_stream_summary(StreamName=self.physical[logical])["StreamDescriptionSummary"]["StreamARN"]
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(str(self(p)) for p in parts)
        if set(value) == {"Fn::Split"}:
            sep, text = value["Fn::Split"]
            return str(self(text)).split(sep)
        if set(value) == {"Fn::Select"}:
            index, items = value["Fn::Select"]
            return self(items)[int(index)]
        return {k: self(v) for k, v in value.items()}


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_template_creates_in_moto_and_resources_are_found(templates, environment):
    _create_in_moto(templates[environment], environment)


def _create_in_moto(template: dict, environment: str, then=None) -> None:
    """Create the template in moto's CloudFormation (the Glue catalog through the Glue API), check what every
    environment must have, then run `then(glue, outputs)` inside the same moto session."""
    config = load_config().get(environment)
    present = {r["Type"] for r in template["Resources"].values()}
    modelled = _modelled_types()
    # moto "models" every Custom:: type by invoking its provider Lambda, which cannot run in process.
    unmodelled_present = {t for t in present if t.startswith("Custom::") or t not in modelled}
    assert unmodelled_present == UNMODELLED_BY_MOTO & present, (
        "the unmodelled resource types changed; update UNMODELLED_BY_MOTO deliberately"
    )
    stripped, removed = _strip(template, UNMODELLED_BY_MOTO)
    assert {r["Type"] for r in removed.values()} - UNMODELLED_BY_MOTO <= REMOVED_WITH_UNMODELLED
    _adapt_for_moto(stripped)

    with mock_aws():
        account = boto3.client("sts", region_name=REGION).get_caller_identity()["Account"]
        # What `cdk bootstrap` provides in a real account: the version parameter and the asset bucket.
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
        s3 = boto3.client("s3", region_name=REGION)
        assets = f"cdk-hnb659fds-assets-{account}-{REGION}"
        s3.create_bucket(Bucket=assets, CreateBucketConfiguration={"LocationConstraint": REGION})
        for key in _lambda_code(stripped):
            s3.put_object(Bucket=assets, Key=key, Body=b"PK\x05\x06" + b"\x00" * 18)  # an empty zip

        cfn = boto3.client("cloudformation", region_name=REGION)
        name = f"streamlake-{environment}"
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(stripped), Capabilities=["CAPABILITY_IAM"])
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
        physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId")
                    for r in cfn.describe_stack_resources(StackName=name)["StackResources"]}

        # Catalog resources through the Glue API, from the template's properties, in dependency order.
        glue = boto3.client("glue", region_name=REGION)
        resolve = _Resolver(account, stack["StackId"], physical, removed)
        for type_ in GLUE_API_CREATED:
            for resource in removed.values():
                if resource["Type"] != type_:
                    continue
                props = resolve(resource["Properties"])
                if type_ == "AWS::Glue::Database":
                    glue.create_database(CatalogId=props["CatalogId"], DatabaseInput=props["DatabaseInput"])
                elif type_ == "AWS::Glue::Registry":
                    glue.create_registry(RegistryName=props["Name"], Description=props["Description"])
                elif type_ == "AWS::Glue::Schema":
                    glue.create_schema(
                        RegistryId={"RegistryArn": props["Registry"]["Arn"]}, SchemaName=props["Name"],
                        DataFormat=props["DataFormat"], Compatibility=props["Compatibility"],
                        SchemaDefinition=props["SchemaDefinition"])
                elif type_ == "AWS::Glue::SchemaVersion":
                    glue.register_schema_version(SchemaId={"SchemaArn": props["Schema"]["SchemaArn"]},
                                                 SchemaDefinition=props["SchemaDefinition"])
                else:
                    glue.create_table(CatalogId=props["CatalogId"], DatabaseName=props["DatabaseName"],
                                      TableInput=props["TableInput"])

        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        kinesis = boto3.client("kinesis", region_name=REGION)
        for settings in config.kinesis_streams:
            stream_name = outputs[f"KinesisStreamName{settings.name.capitalize()}"]
            # A retained stream is named per stack instance (infra/naming.py): the stack uuid's first 8 digits.
            suffix = f"-{stack['StackId'].split('/')[2].split('-')[0]}" if config.removal_policy == "retain" else ""
            assert stream_name == f"streamlake-{environment}-{settings.name}{suffix}"
            summary = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
            # (moto's stream model ignores StreamEncryption; test_streams.py asserts it on the template.)
            assert (summary["StreamStatus"], summary["RetentionPeriodHours"]) == ("ACTIVE", settings.retention_hours)
        buckets = {b["Name"] for b in s3.list_buckets()["Buckets"]}
        for key in ("LakeBucketName", "DeadLetterBucketName", "CheckpointBucketName", "JobAssetsBucketName", "AccessLogBucketName"):
            assert outputs[key] in buckets  # (encryption, versioning, lifecycle: test_storage.py)
        database = f"streamlake_{environment}"
        assert glue.get_database(Name=database)["Database"]["Name"] == database
        tables = {t["Name"] for t in glue.get_tables(DatabaseName=database)["TableList"]}
        lake_tables = {"events" if d == "clickstream" else d for d in config.datasets}  # one per dataset carried
        kinesis = [s.name for s in config.kinesis_streams]  # a Kafka source has no table (docs/kafka.md)
        # a source's dead letters: one table, or a routed source's one per dataset and one for its unroutable records
        dead_letters = {table for s in config.source_names for table in (
            [f"dead_letters_{s}_{d}" for d in (*config.routes[s].datasets, "unroutable")] if s in config.routes
            else [f"dead_letters_{s}"])}
        expected = lake_tables | {f"source_{s}" for s in kinesis} | dead_letters
        assert tables == expected
        lake = glue.get_table(DatabaseName=database, Name="events")["Table"]
        assert lake["StorageDescriptor"]["Location"] == f"s3://{outputs['LakeBucketName']}/events/"
        assert [k["Name"] for k in lake["PartitionKeys"]] == ["event_date", "event_hour"]
        found = glue.get_schema(SchemaId={"RegistryName": outputs["SchemaRegistryName"], "SchemaName": "com.streamlake.events.Event"})
        assert (found["DataFormat"], found["Compatibility"]) == ("AVRO", "BACKWARD")
        if then is not None:
            then(glue, outputs)


@pytest.mark.e2e
def test_an_evolved_schema_deploys_on_moto_as_version_2(tmp_path, monkeypatch):
    """A new committed version (an optional field added), deployed: version 2 registered after version 1,
    the Kinesis source table and the lake table with the new column. (The make-diff side of the same change
    is tests/infra/test_schema_evolution_deploy.py.)"""
    import json

    from devtools.snapshot import synth_templates
    from glue_jobs import schema
    from tests.infra.test_schema_evolution_deploy import use_clickstream_versions

    v1 = json.loads(schema.schema_text(1))
    v2 = {**v1, "fields": [*v1["fields"], {"name": "campaign", "type": ["null", "string"], "default": None}]}
    use_clickstream_versions(tmp_path / "datasets", monkeypatch, v1, v2)  # datasets/clickstream/schema.v2.avsc
    try:
        template = json.loads(json.dumps(synth_templates(["staging"])["staging"]))
    finally:
        monkeypatch.undo()

    def evolved(glue, outputs):
        schema_id = {"RegistryName": outputs["SchemaRegistryName"], "SchemaName": "com.streamlake.events.Event"}
        assert glue.get_schema(SchemaId=schema_id)["LatestSchemaVersion"] == 2
        latest = glue.get_schema_version(SchemaId=schema_id, SchemaVersionNumber={"LatestVersion": True})
        assert json.loads(latest["SchemaDefinition"]) == v2
        database = "streamlake_staging"
        # the MSK topic carries orders (msk.dataset), read by its job without a catalog table
        assert "source_orders" not in {t["Name"] for t in glue.get_tables(DatabaseName=database)["TableList"]}
        clicks = glue.get_table(DatabaseName=database, Name="source_clickstream")["Table"]["StorageDescriptor"]["Columns"]
        assert "campaign" in [c["Name"] for c in clicks]
        lake = glue.get_table(DatabaseName=database, Name="events")["Table"]["StorageDescriptor"]["Columns"]
        assert "campaign" in [c["Name"] for c in lake]

    _create_in_moto(template, "staging", then=evolved)
