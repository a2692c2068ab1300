"""make diff: a config change to one environment shows up for that environment only, priced."""

from __future__ import annotations

import json

import pytest

from devtools import diff
from devtools.snapshot import normalize, synth_templates
from infra.config import DEFAULT_CONFIG_PATH, load_config, parse_config, update_raw


def test_shard_increase_in_prod_only_shows_in_prod_with_positive_cost_delta(templates):
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    base_config = load_config()
    changed = parse_config(update_raw(raw, "prod", "kinesis_streams", [
        {"name": "clickstream", "dataset": "clickstream", "capacity_mode": "provisioned", "shard_count": 16, "retention_hours": 168}]))
    new_templates = synth_templates(config=changed)
    report = diff.render_report(templates, new_templates, base_config, changed, "HEAD")
    sections = {s.split("\n", 1)[0]: s for s in report.split("\n## ")[1:]}
    assert "No infrastructure changes." in sections["dev"]
    assert "No infrastructure changes." in sections["staging"]
    prod = sections["prod"]
    assert "0 added, 0 removed, 0 replaced, 2 modified" in prod  # the stream, and its shard-capacity alarm's math
    assert "`Properties.ShardCount`: 8 → 16" in prod
    # 8 more shards x 730 h x (0.015 USD a shard-hour + 0.02 extended retention, 168 h) + 8 x 4 shard-level metrics x 0.30
    assert "(**+214.00**)" in prod
    # the reverse change reads as a saving
    reverse = diff.render_report(new_templates, templates, changed, base_config, "HEAD")
    assert "(**-214.00**)" in reverse


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
    text = diff.render_environment("dev", list(changes.values()), diff.CostRange(5.0, 10.0), diff.CostRange(5.0, 10.0))
    assert text.index("IAM, security group and policy changes") < text.index("### Replaced") < text.index("### Removed")
    assert "(**±0.00**)" in text


def _schema(name: str, definition: str) -> dict:
    return {"Type": "AWS::Glue::Schema", "Properties": {"Name": name, "SchemaDefinition": definition,
                                                      "DataFormat": "AVRO", "Compatibility": "BACKWARD"}}


def test_a_create_only_change_to_a_named_resource_is_labelled_deploy_will_fail():
    """AWS::Glue::Schema's SchemaDefinition and AWS::MSK::Configuration's KafkaVersionsList are create-only
    (cfn-lint's bundled resource schemas): with the name kept, the replacement cannot be created."""
    old = {"Resources": {
        "Schema": _schema("com.x.Event", '{"type":"record","fields":[]}'),
        "Brokers": {"Type": "AWS::MSK::Configuration", "Properties": {"Name": "lake-brokers", "KafkaVersionsList": ["3.8.x"]}},
        "Stream": {"Type": "AWS::Kinesis::Stream", "Properties": {"Name": "s", "RetentionPeriodHours": 24}},
    }}
    new = {"Resources": {
        "Schema": _schema("com.x.Event", '{"type":"record","fields":[{"name":"a","type":"string"}]}'),
        "Brokers": {"Type": "AWS::MSK::Configuration", "Properties": {"Name": "lake-brokers", "KafkaVersionsList": ["3.9.x"]}},
        "Stream": {"Type": "AWS::Kinesis::Stream", "Properties": {"Name": "s", "RetentionPeriodHours": 48}},
    }}
    changes = {c.logical_id: c for c in diff.diff_templates(old, new)}
    assert (changes["Schema"].kind, changes["Schema"].replacing, changes["Schema"].deploy_fails) == (
        "replaced", ["SchemaDefinition"], True)
    assert changes["Schema"].data_loss  # the registered versions go with it
    assert (changes["Brokers"].kind, changes["Brokers"].replacing, changes["Brokers"].deploy_fails) == (
        "replaced", ["KafkaVersionsList"], True)
    assert (changes["Stream"].kind, changes["Stream"].deploy_fails) == ("modified", False)
    text = diff.render_environment("prod", list(changes.values()), diff.CostRange(1.0, 1.0), diff.CostRange(1.0, 1.0))
    assert "⛔ 2 change(s) would fail to deploy" in text
    assert "`Stream` (AWS::Kinesis::Stream): in place" in text
    assert "replacement (create-only `KafkaVersionsList`) — ⛔ **deploy will fail**" in text
    # The same replacement under a new name deploys.
    new["Resources"]["Brokers"]["Properties"]["Name"] = "lake-brokers-3-9-x"
    brokers = {c.logical_id: c for c in diff.diff_templates(old, new)}["Brokers"]
    assert (brokers.kind, brokers.deploy_fails, brokers.data_loss) == ("replaced", False, False)


def test_kafka_version_change_replaces_the_broker_configuration_and_deploys(templates):
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    changed = parse_config(update_raw(raw, "staging", "msk.kafka_version", "3.9.x"))
    new_templates = synth_templates(["staging"], config=changed)
    changes = {c.type: c for c in diff.diff_templates(templates["staging"], new_templates["staging"])
               if c.type.startswith("AWS::MSK::")}
    assert changes["AWS::MSK::Configuration"].kind == "replaced"
    assert not changes["AWS::MSK::Configuration"].deploy_fails
    assert (changes["AWS::MSK::Cluster"].kind, changes["AWS::MSK::Cluster"].deploy_fails) == ("modified", False)
    assert not [c for c in diff.diff_templates(templates["staging"], new_templates["staging"]) if c.deploy_fails]


def test_table_columns_are_compared_by_name():
    def table(columns):
        return {"Type": "AWS::Glue::Table", "Properties": {"DatabaseName": "db", "TableInput": {
            "Name": "events", "StorageDescriptor": {"Columns": [{"Name": n, "Type": t} for n, t in columns]}}}}

    old = {"Resources": {"T": table([("a", "string"), ("b", "bigint"), ("c", "string")])}}
    new = {"Resources": {"T": table([("a", "string"), ("probe", "string"), ("b", "double"), ("c", "string")])}}
    (change,) = diff.diff_templates(old, new)
    assert (change.kind, change.columns) == ("modified", ["column `probe` added (string)", "column `b` type bigint → double"])
    assert change.changes == []  # no index-by-index column lines
    assert "  - column `probe` added (string)" in diff.render_environment("dev", [change], None, diff.CostRange(0.0, 0.0))


def test_diff_writes_its_report_where_no_cdk_out_exists_yet(tmp_path, capsys):
    out = tmp_path / "cdk.out" / "diff.md"
    assert diff.main(["--out", str(out)]) == 0
    assert out.read_text().startswith("# Infrastructure diff against `HEAD`")


def test_network_cost_is_priced_from_the_template(templates):
    """NAT gateways and interface endpoints (one ENI-hour per subnet) come from the synthesized template, so a
    code change that drops the VPC shows in the cost delta although the config did not change."""
    prices = {"hours_per_month": 730, "network": {"nat_gateway_hour": 0.045, "interface_endpoint_hour_per_az": 0.01}}
    template = {"Resources": {
        "Nat": {"Type": "AWS::EC2::NatGateway", "Properties": {}},
        "Glue": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {"VpcEndpointType": "Interface", "SubnetIds": ["a", "b"]}},
        "S3": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {"VpcEndpointType": "Gateway", "RouteTableIds": ["a", "b"]}},
    }}
    assert diff.network_cost(template, prices) == 730 * 0.045 + 2 * 730 * 0.01
    # dev has no MSK, so no VPC at all; prod has three AZs: 3 NAT gateways and 5 interface endpoints in each
    assert diff.network_cost(templates["dev"], prices) == 0
    assert diff.network_cost(templates["prod"], prices) == pytest.approx(3 * 730 * 0.045 + 5 * 3 * 730 * 0.01)


def test_the_cost_line_gives_the_auto_scaling_range_and_calls_out_the_maximum():
    text = diff.render_environment("dev", [], diff.CostRange(100.0, 200.0), diff.CostRange(150.0, 300.0))
    assert "fixed monthly cost at maximum workers 200.00 → 300.00 USD (**+100.00**)" in text
    assert "100.00–200.00 → 150.00–300.00 USD a month; the maximum is what the bill can reach" in text


def test_a_replacement_cascades_through_create_only_references():
    """A new VPC CIDR replaces the VPC; its subnets (VpcId is create-only) and then the MSK cluster that names
    them (ClientSubnets is create-only) get new physical ids although their template text is unchanged, and
    the cluster keeps its name: the deploy fails."""
    def template(cidr):
        return {"Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": cidr}},
            "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/20"}},
            "Cluster": {"Type": "AWS::MSK::Cluster", "Properties": {
                "ClusterName": "lake", "KafkaVersion": "3.8.x", "NumberOfBrokerNodes": 2,
                "BrokerNodeGroupInfo": {"ClientSubnets": [{"Ref": "Subnet"}], "InstanceType": "kafka.m7g.large"}}},
            "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Dimensions": [{"Value": {"Ref": "Cluster"}}]}},
        }}
    changes = {c.logical_id: c for c in diff.diff_templates(template("10.0.0.0/16"), template("10.1.0.0/16"))}
    assert {k: c.kind for k, c in changes.items()} == {"Vpc": "replaced", "Subnet": "replaced", "Cluster": "replaced"}
    assert changes["Cluster"].replacing == ["BrokerNodeGroupInfo.ClientSubnets"]
    assert changes["Cluster"].deploy_fails and not changes["Subnet"].deploy_fails


def test_a_change_to_the_glue_security_configuration_is_a_replacement_that_deploys():
    """Every property of AWS::Glue::SecurityConfiguration is create-only; its name follows its content
    (infra/glue_security.py), so a changed configuration comes with a new name and the replacement deploys."""
    import aws_cdk as cdk
    from aws_cdk import assertions
    from aws_cdk import aws_kms as kms

    from infra.glue_security import GlueJobSecurity

    def template(key_id: str) -> dict:
        stack = cdk.Stack(cdk.App(), "Sec")
        GlueJobSecurity(stack, "GlueSecurity", environment="dev", data_key=kms.Key(stack, key_id),
                        removal_policy=cdk.RemovalPolicy.DESTROY)
        return assertions.Template.from_stack(stack).to_json()

    old, new = template("DataKey"), template("OtherDataKey")  # the jobs' S3 writes move to another key
    (change,) = [c for c in diff.diff_templates(old, new) if c.type == "AWS::Glue::SecurityConfiguration"]
    assert change.kind == "replaced" and "Name" in change.replacing
    assert not change.deploy_fails and not change.data_loss
    names = [dict(c)["Name"] for c in (old, new) for c in [next(r["Properties"] for r in c["Resources"].values()
                                                                 if r["Type"] == "AWS::Glue::SecurityConfiguration")]]
    assert names[0] != names[1] and all(n.startswith("streamlake-dev-jobs-") for n in names)
    assert template("DataKey") == old  # unchanged content, unchanged name: nothing replaced


def test_a_change_that_loses_data_is_refused_unless_the_operator_allows_it(templates, monkeypatch, capsys):
    """An MSK cluster (or any resource holding data) replaced or removed: labelled data loss, exit 4; the operator
    opts in with --allow-data-loss (make diff ALLOW_DATA_LOSS=1)."""
    import copy

    base = copy.deepcopy(templates)
    base["staging"]["Resources"]["RetiredStream"] = {"Type": "AWS::Kinesis::Stream", "Properties": {"ShardCount": 1}}
    monkeypatch.setattr(diff, "base_state", lambda ref: (base, load_config()))
    assert diff.main([]) == 4
    captured = capsys.readouterr()
    assert "staging: RetiredStream (AWS::Kinesis::Stream, removed); refused unless --allow-data-loss" in captured.err
    assert "**removed** `RetiredStream` (AWS::Kinesis::Stream) — ⚠ **data loss**" in captured.out
    assert diff.main(["--allow-data-loss"]) == 0


def _grant(principal, table: str, permissions: list[str]) -> dict:
    return {"Type": "AWS::LakeFormation::PrincipalPermissions", "Properties": {
        "Principal": {"DataLakePrincipalIdentifier": principal}, "PermissionsWithGrantOption": [],
        "Resource": {"Table": {"CatalogId": "111122223333", "DatabaseName": "db", "Name": table}},
        "Permissions": permissions}}


def test_a_grant_change_is_labelled_a_replacement_and_on_the_same_principal_and_resource_a_failing_deploy():
    """Every property of AWS::LakeFormation::PrincipalPermissions is create-only and its identifier is the principal and
    the resource (cfn-lint's bundled schema): a new permission list on the same table and role replaces the grant under
    the identifier the old one holds, which cannot deploy, and so does the same grant moved to a new logical id; a
    grant on another table, or to a role that is itself replaced, is a new grant made before the old one is revoked."""
    role = {"Fn::GetAtt": ["ReaderRole", "Arn"]}
    old = {"Resources": {
        "ReaderRole": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "reader", "Path": "/"}},
        "JobRole": {"Type": "AWS::IAM::Role", "Properties": {"Path": "/"}},
        "MorePermissions": _grant(role, "orders", ["SELECT"]),
        "OtherTable": _grant(role, "orders", ["SELECT", "DESCRIBE"]),
        "NewRole": _grant({"Fn::GetAtt": ["JobRole", "Arn"]}, "events", ["SELECT"]),
        "OldId": _grant(role, "events", ["SELECT"]),
        "OldIdOtherTable": _grant(role, "orders_v1", ["SELECT"]),
    }}
    new = {"Resources": {
        **{k: v for k, v in old["Resources"].items() if not k.startswith("OldId")},
        "NewId": _grant(role, "events", ["SELECT"]),  # the same grant under a new logical id: its pair is revoked
        "NewIdOtherTable": _grant(role, "orders_v2", ["SELECT"]),  # a new pair: made before the old is revoked
        "JobRole": {"Type": "AWS::IAM::Role", "Properties": {"Path": "/jobs/"}},  # Path is create-only: a new role
        "MorePermissions": _grant(role, "orders", ["SELECT", "DESCRIBE"]),
        "OtherTable": _grant(role, "dead_letters_orders", ["SELECT", "DESCRIBE"]),
    }}
    changes = {c.logical_id: c for c in diff.diff_templates(old, new)}
    assert (changes["MorePermissions"].kind, changes["MorePermissions"].replacing) == ("replaced", ["Permissions"])
    assert changes["MorePermissions"].same_grantee and changes["MorePermissions"].deploy_fails
    assert (changes["OtherTable"].kind, changes["OtherTable"].replacing) == ("replaced", ["Resource"])
    assert not changes["OtherTable"].deploy_fails
    assert (changes["NewRole"].kind, changes["NewRole"].replacing) == ("replaced", ["Principal"])
    assert not changes["NewRole"].deploy_fails  # the replaced role is a new principal at deploy time
    assert (changes["NewId"].kind, changes["NewId"].moved_from, changes["NewId"].deploy_fails) == ("added", "OldId", True)
    assert (changes["NewIdOtherTable"].moved_from, changes["NewIdOtherTable"].deploy_fails) == (None, False)
    text = diff.render_environment("prod", list(changes.values()), diff.CostRange(1.0, 1.0), diff.CostRange(1.0, 1.0))
    review_first = text.split("### ⚠ IAM, security group and policy changes (review first)", 1)[1]
    assert "`MorePermissions` (AWS::LakeFormation::PrincipalPermissions): replacement (create-only `Permissions`) — ⛔ " \
           "**deploy will fail: grant replaced on the same principal and resource**" in review_first
    assert "`OtherTable` (AWS::LakeFormation::PrincipalPermissions): replacement (create-only `Resource`) — 🔑 " \
           "**grant replaced**" in review_first
    assert "`NewRole` (AWS::LakeFormation::PrincipalPermissions): replacement (create-only `Principal`) — 🔑 " \
           "**grant replaced**" in review_first
    assert "`NewId` (AWS::LakeFormation::PrincipalPermissions) — ⛔ **deploy will fail: grant moved from `OldId` on " \
           "the same principal and resource**" in review_first
    assert "⛔ 2 change(s) would fail to deploy**: `NewId`, `MorePermissions`" in text
    assert "needs the name it keeps" not in text


def test_switching_lake_formation_on_adds_its_grants_and_replaces_nothing(templates):
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    changed = parse_config(update_raw(raw, "dev", "lake_formation.enabled", True))
    new = synth_templates(["dev"], config=changed)["dev"]
    changes = diff.diff_templates(normalize(templates["dev"]), normalize(new))
    kinds = {(c.type, c.kind) for c in changes}
    assert ("AWS::LakeFormation::Resource", "added") in kinds and ("AWS::LakeFormation::PrincipalPermissions", "added") in kinds
    assert not [c for c in changes if c.kind in ("replaced", "removed") or c.deploy_fails]


def test_a_dataset_switched_to_iceberg_is_priced_in_the_cost_delta():
    """orders becomes an Iceberg table (its dataset.json, not the config): dev's cost grows by its commits and hourly
    maintenance (devtools/sizing.py; prices written out here: S3 PUT/LIST 0.005 and GET 0.0004 USD per 1,000, Data
    Catalog 1.00 per million): 43,800 commits x (3 PUT + 99 GET + 6 catalog requests) = 2.65; maintenance requests
    730 x (50 PUT or LIST + 10 GET + 13 catalog) = 0.19; the maintenance's Glue time 0.95 x orders' quarter of dev's
    compaction (2 x 5/60 h x 730 x 0.29, split evenly over dev's four datasets) = -0.44. Switching back is the same
    amount saved."""
    put, get, catalog = 0.005 / 1000, 0.0004 / 1000, 1.00 / 1e6
    expected = (round(43_800 * (3 * put + 99 * get + 6 * catalog), 2) + round(730 * (50 * put + 10 * get + 13 * catalog), 2)
                + round(2 * (5 / 60) * 730 * 0.29 / 4 * (0.95 - 1), 2))
    assert expected == pytest.approx(2.40)
    config = load_config()
    assert config.get("dev").datasets == ("checkouts", "clickstream", "orders", "page_views")  # the compaction's four shares
    empty = {"dev": {"Resources": {}}}
    report = diff.render_report(empty, empty, config, config, "HEAD", base_iceberg=frozenset(), new_iceberg={"orders"})
    dev = report.split("\n## ")[1]
    assert f"(**+{expected:.2f}**)" in dev
    assert f"Of which Iceberg datasets (commits at one per window, maintenance; estimates, `streamlake sizing --iceberg " \
           f"--environment dev`): 0.00 → {expected:.2f} USD a month." in dev
    back = diff.render_report(empty, empty, config, config, "HEAD", base_iceberg={"orders"}, new_iceberg=frozenset())
    assert f"(**-{expected:.2f}**)" in back
    unchanged = diff.render_report(empty, empty, config, config, "HEAD", base_iceberg={"orders"}, new_iceberg={"orders"})
    assert "(**±0.00**)" not in unchanged and "No infrastructure changes." in unchanged


def test_the_base_iceberg_datasets_are_read_from_the_committed_dataset_files(tmp_path, monkeypatch):
    """`make diff` prices the base with the datasets that were Iceberg at the base ref: the dataset.json committed there."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    for name, contract in {"orders": {"table_format": "iceberg"}, "clickstream": {}, "broken": None}.items():
        (tmp_path / "datasets" / name).mkdir(parents=True)
        (tmp_path / "datasets" / name / "dataset.json").write_text("{" if contract is None else json.dumps(contract))
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "base")
    (tmp_path / "datasets" / "clickstream" / "dataset.json").write_text(json.dumps({"table_format": "iceberg"}))
    monkeypatch.setattr(diff, "REPO_ROOT", tmp_path)
    assert diff.iceberg_datasets_at("HEAD") == {"orders"}  # the commit, not the working tree; the broken file is Parquet


def test_a_worker_type_change_in_prod_names_the_restart_of_every_streaming_job(templates):
    """A JobRun keeps the worker type it started with (Glue API JobRun): the job keeper restarts the running job, and
    the report says so before any resource detail."""
    import dataclasses

    from devtools.snapshot import normalize, synth_templates

    config = load_config()
    prod = config.get("prod")
    assert prod.streaming.worker_type != "G.2X"
    changed = dataclasses.replace(prod, streaming=dataclasses.replace(prod.streaming, worker_type="G.2X"))
    new = synth_templates(["prod"], config=dataclasses.replace(config, environments={**config.environments, "prod": changed}))
    old_t, new_t = normalize(templates["prod"]), normalize(new["prod"])
    changes = diff.diff_templates(old_t, new_t)
    restarts = diff.streaming_restarts(old_t, new_t, changes)
    assert sorted(restarts) == sorted(prod.source_names)
    assert all("`Properties.WorkerType`" in reasons for reasons in restarts.values())
    text = diff.render_environment("prod", changes, diff.CostRange(1, 1), diff.CostRange(2, 2), restarts)
    assert f"carrying {len(prod.source_names)} source(s)" in text
    # an unchanged synth restarts nothing
    assert diff.streaming_restarts(old_t, old_t, []) == {}


# What dev's routed stream `events` (page_views and checkouts by `kind`) adds to dev's template, logical ids without their
# hash: the stream, its source table, its alarms and its unroutable records' dead-letter table; per dataset its lake
# table, registry schema, dead-letter table under the source, reader policy, three named queries and two alarms.
ROUTED_STREAM_ADDS = sorted([
    "StreamsEvents", "CatalogSourceTableEvents", "CatalogDeadLetterTableEventsUnroutable", "MonitoringUnroutableShareEvents",
    *(f"Monitoring{alarm}Events" for alarm in ("BatchOverrun", "ConsumerLag", "IteratorAge", "NoRecordsProcessed",
                                               "ReadThrottled", "WriteThrottled")),
    *(logical_id for dataset in ("PageViews", "Checkouts") for logical_id in (
        f"CatalogLakeTable{dataset}", f"CatalogSchema{dataset}", f"CatalogDeadLetterTableEvents{dataset}",
        f"ReadersReaderPolicy{dataset}", f"Readers{dataset}RowsPerHour", f"Readers{dataset}DeadLettersByReason",
        f"Readers{dataset}Freshness", f"MonitoringDeadLetterRate{dataset}", f"MonitoringFreshness{dataset}")),
])
# What dev's shared job "ingest" adds in place of its sources' jobs of their own.
INGEST_JOB_ADDS = sorted([
    "StreamingJobIngestJob", "StreamingJobIngestRole", "StreamingJobIngestRoleDefaultPolicy",
    "StreamingJobIngestRoleOverflowPolicy1", "StreamingJobIngestContinuousLogs", "StreamingJobIngestErrorLogs",
    "StreamingJobIngestOutputLogs", "JobKeeperDeployIngest", "MonitoringNotRunningIngest",
    "MonitoringOutagePastHalfRetentionIngest", "MonitoringRestartsCappedIngest",
])
# Added to dev since 1d225b0 for other reasons: the compaction's log groups are the stack's own now
# (test_review_findings.py), and the job keeper's own alarms.
OTHER_DEV_ADDS_SINCE_1D225B0 = sorted(["CompactionErrorLogs", "CompactionOutputLogs", "MonitoringJobKeeperAsyncEventsDropped",
                                       "MonitoringJobKeeperErrors"])
SOURCES_ADDED_SINCE_1D225B0 = {"dev": ("events",)}  # dev's routed stream: a new source, not a moved one


def test_from_1d225b0_each_kept_job_restarts_once_dev_regroups_and_nothing_is_replaced(templates):
    """From 1d225b0 (tests/infra/fixtures/templates_1d225b0) to the shipped config: no Glue job, table, stream or bucket
    is replaced in any environment. staging's and prod's jobs are kept: the new digest formula (DigestFormula,
    RunsWith) changes every deploy resource, so each restarts once, named. dev's two jobs give way to its shared job
    "ingest": the report lists both sources as moved (the old jobs carry dev's tags, which the keeper's stop
    statement takes, so the move is not refused), and only those two jobs go. dev's routed stream `events`, new since
    1d225b0, joins "ingest" as an added source, not a moved one: its stream, tables, schemas, reader policies, queries
    and alarms are added, and nothing of it is replaced. (The log groups changed since 1d225b0 for another reason: they
    are the stack's own now, test_review_findings.py.)"""
    import gzip
    import re
    from pathlib import Path

    from devtools.snapshot import normalize

    fixtures = Path(__file__).resolve().parent / "fixtures" / "templates_1d225b0"
    for environment, template in templates.items():
        old = normalize(json.loads(gzip.decompress((fixtures / f"{environment}.template.json.gz").read_bytes())))
        new = normalize(template)
        changes = diff.diff_templates(old, new)
        assert not [c.logical_id for c in changes if c.kind == "replaced" and c.type in (
            "AWS::Glue::Job", "AWS::Glue::Table", "AWS::Kinesis::Stream", "AWS::S3::Bucket", "AWS::MSK::Cluster")], environment
        restarts, moves = diff.streaming_restarts(old, new, changes), diff.source_moves(old, new)
        config = load_config().get(environment)
        kept = [", ".join(job.sources) for job in config.job_groups if not job.declared]
        assert sorted(restarts) == sorted(kept), environment
        assert all("deploy `Properties.DigestFormula`" in reasons for reasons in restarts.values())
        grouped = [source for job in config.job_groups if job.declared for source in job.sources]
        added_sources = SOURCES_ADDED_SINCE_1D225B0.get(environment, ())
        moved = [source for source in grouped if source not in added_sources]
        assert [(m.source, m.old_job_stoppable) for m in moves] == [(source, True) for source in sorted(moved)], environment
        jobs = {kind: sorted(c.logical_id for c in changes if c.type == "AWS::Glue::Job" and c.kind == kind)
                for kind in ("added", "removed")}
        assert jobs["removed"] == sorted({m.old_job for m in moves}), environment  # only the regrouped jobs go
        assert jobs["added"] == sorted({m.new_job for m in moves}), environment
        if environment == "dev":
            assert grouped == ["clickstream", "orders", "events"] and moved == ["clickstream", "orders"]
            assert len(jobs["removed"]) == 2 and len(jobs["added"]) == 1
            text = diff.render_environment(environment, changes, diff.CostRange(1, 1), diff.CostRange(1, 1), restarts, moves)
            assert "**⇄ moves 2 source(s) to another streaming job**" in text and "⛔" not in text
            added = sorted(re.sub(r"[0-9A-F]{8}$", "", c.logical_id) for c in changes if c.kind == "added")
            assert added == sorted(ROUTED_STREAM_ADDS + INGEST_JOB_ADDS + OTHER_DEV_ADDS_SINCE_1D225B0)
            tables = sorted(new["Resources"][c.logical_id]["Properties"]["TableInput"]["Name"] for c in changes
                            if c.kind == "added" and c.type == "AWS::Glue::Table")
            assert tables == ["checkouts", "dead_letters_events_checkouts", "dead_letters_events_page_views",
                              "dead_letters_events_unroutable", "page_views", "source_events"]
        else:
            assert grouped == [] and moved == [], environment


def test_a_change_that_reaches_no_run_restarts_nothing(templates):
    """A job's Description or Tags and a deploy resource's DependsOn or ServiceTimeout do not reach a running job."""
    import copy

    from devtools.snapshot import normalize

    old = normalize(templates["dev"])
    new = copy.deepcopy(old)
    for resource in new["Resources"].values():
        if resource["Type"] == "AWS::Glue::Job":
            resource["Properties"]["Description"] += " (reworded)"
            resource["Properties"]["Tags"] = {**resource["Properties"].get("Tags", {}), "team": "lake"}
        if resource["Type"] == diff.DEPLOY_TYPE:
            resource["DependsOn"] = [*resource.get("DependsOn", []), "Extra"]
            resource["Properties"]["ServiceTimeout"] = "600"
    assert diff.streaming_restarts(old, new, diff.diff_templates(old, new)) == {}
    new_timeout = copy.deepcopy(old)
    for resource in new_timeout["Resources"].values():
        if resource["Type"] == "AWS::Glue::Job" and resource["Properties"]["Command"]["Name"] == "gluestreaming":
            resource["Properties"]["Timeout"] = 60
    restarts = diff.streaming_restarts(old, new_timeout, diff.diff_templates(old, new_timeout))
    assert sorted(restarts) == ["clickstream, orders, events"] and all(r == ["`Properties.Timeout`"] for r in restarts.values())
