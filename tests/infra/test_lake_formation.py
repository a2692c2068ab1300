"""Lake Formation mode (config `lake_formation`, infra/lake_formation.py, docs/lake-formation.md): off in every shipped
environment, and with it on the lake bucket registered through the stack's own role and each principal granted exactly
its tables. Every synth here runs cdk-nag (infra/app_builder.py fails synth on a finding) and the templates go through
cfn-lint."""

from __future__ import annotations

import json

import pytest

from glue_jobs import datasets
from infra.config import DEFAULT_CONFIG_PATH, ConfigError, load_config, parse_config, update_raw
from infra.constants import pascal
from tests.infra.test_cfn_lint import _accepted, _lint


def _raw(env: str, **settings) -> dict:
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    for key, value in {"enabled": True, **settings}.items():
        raw = update_raw(raw, env, f"lake_formation.{key}", value)
    return raw


def _synth(env: str, **settings) -> dict:
    from devtools.snapshot import synth_templates

    return synth_templates([env], config=parse_config(_raw(env, **settings)))[env]


def _of_type(template: dict, type_: str) -> dict[str, dict]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == type_}


def _role_id(template: dict, prefix: str) -> str:
    (found,) = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::Role" and k.startswith(prefix)]
    return found


def _resource(resource: dict) -> str:
    """A grant's resource, readable: `db`, `db.table` or `location:<bucket logical id>/<prefix>`."""
    if "Database" in resource:
        return resource["Database"]["Name"]
    if "Table" in resource:
        return f"{resource['Table']['DatabaseName']}.{resource['Table']['Name']}"
    parts = resource["DataLocation"]["ResourceArn"]["Fn::Join"][1]
    return "location:" + "".join(p if isinstance(p, str) else p["Fn::GetAtt"][0] for p in parts)


def _grants(template: dict) -> dict[tuple[str, str], list[str]]:
    """{(principal's logical id, resource): permissions} of every PrincipalPermissions, each with no grant option."""
    grants = {}
    for props in _of_type(template, "AWS::LakeFormation::PrincipalPermissions").values():
        assert props["PermissionsWithGrantOption"] == []
        role_id, attribute = props["Principal"]["DataLakePrincipalIdentifier"]["Fn::GetAtt"]
        assert attribute == "Arn"
        key = (role_id, _resource(props["Resource"]))
        assert key not in grants, f"{key}: granted twice (a second grant on one principal and resource fails the deploy)"
        grants[key] = props["Permissions"]
    return grants


@pytest.fixture(scope="module")
def dev_on() -> dict:
    return _synth("dev")


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_off_in_every_shipped_environment_so_no_lake_formation_resources(templates, environment):
    assert load_config().get(environment).lake_formation.enabled is False
    assert [r["Type"] for r in templates[environment]["Resources"].values() if r["Type"].startswith("AWS::LakeFormation::")] == []
    assert not [k for k in templates[environment]["Outputs"] if k.startswith("ReaderRoleArn")]


def test_on_registers_the_lake_bucket_through_the_stacks_own_role_with_the_data_key(dev_on):
    ((_, registration),) = _of_type(dev_on, "AWS::LakeFormation::Resource").items()
    (bucket_id,) = [k for k in dev_on["Resources"] if k.startswith("StorageLakeBucket") and dev_on["Resources"][k]["Type"] == "AWS::S3::Bucket"]
    role_id = _role_id(dev_on, "LakeFormationRegistrationRole")
    assert registration == {"ResourceArn": {"Fn::GetAtt": [bucket_id, "Arn"]}, "UseServiceLinkedRole": False,
                            "RoleArn": {"Fn::GetAtt": [role_id, "Arn"]}}
    trust = dev_on["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "lakeformation.amazonaws.com"}]
    (policy,) = [p for p in _of_type(dev_on, "AWS::IAM::Policy").values() if p["Roles"] == [{"Ref": role_id}]]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    assert sorted(statements["ReadWriteTheLake"]["Action"]) == ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
    assert statements["ReadWriteTheLake"]["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]}
    assert statements["ListTheLake"]["Resource"] == {"Fn::GetAtt": [bucket_id, "Arn"]}
    (key_id,) = [k for k, v in dev_on["Resources"].items() if v["Type"] == "AWS::KMS::Key" and k.startswith("StorageDataKey")]
    assert statements["UseTheDataKey"]["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_on_grants_each_job_role_and_each_datasets_reader_role_exactly_their_tables(dev_on):
    """dev: clickstream and orders, both Parquet, each from a Kinesis stream of its own, and page_views and checkouts
    from the routed stream `events`, all run by the job "ingest" (one role: one grant per table, the database's once,
    named by the job). A routed dataset's reader reads its own share of the source's dead letters, not the unroutable
    ones. The compaction role compacts Parquet by path, so it gets no grant."""
    datasets = ("clickstream", "orders", "page_views", "checkouts")
    job = dict.fromkeys(datasets, _role_id(dev_on, "StreamingJobIngestRole"))
    reader = {d: _role_id(dev_on, f"LakeFormationReaderRole{pascal(d)}") for d in datasets}
    db = "streamlake_dev"
    assert _grants(dev_on) == {
        (job["clickstream"], db): ["DESCRIBE"],
        (job["clickstream"], f"{db}.source_clickstream"): ["SELECT", "DESCRIBE"],
        (job["clickstream"], f"{db}.events"): ["SELECT", "INSERT", "DESCRIBE"],
        (job["orders"], f"{db}.source_orders"): ["SELECT", "DESCRIBE"],
        (job["orders"], f"{db}.orders"): ["SELECT", "INSERT", "DESCRIBE"],
        (reader["clickstream"], db): ["DESCRIBE"],
        (reader["clickstream"], f"{db}.events"): ["SELECT", "DESCRIBE"],
        (reader["clickstream"], f"{db}.dead_letters_clickstream"): ["SELECT", "DESCRIBE"],
        (reader["orders"], db): ["DESCRIBE"],
        (reader["orders"], f"{db}.orders"): ["SELECT", "DESCRIBE"],
        (reader["orders"], f"{db}.dead_letters_orders"): ["SELECT", "DESCRIBE"],
        (job["page_views"], f"{db}.source_events"): ["SELECT", "DESCRIBE"],
        (job["page_views"], f"{db}.page_views"): ["SELECT", "INSERT", "DESCRIBE"],
        (job["checkouts"], f"{db}.checkouts"): ["SELECT", "INSERT", "DESCRIBE"],
        (reader["page_views"], db): ["DESCRIBE"],
        (reader["page_views"], f"{db}.page_views"): ["SELECT", "DESCRIBE"],
        (reader["page_views"], f"{db}.dead_letters_events_page_views"): ["SELECT", "DESCRIBE"],
        (reader["checkouts"], db): ["DESCRIBE"],
        (reader["checkouts"], f"{db}.checkouts"): ["SELECT", "DESCRIBE"],
        (reader["checkouts"], f"{db}.dead_letters_events_checkouts"): ["SELECT", "DESCRIBE"],
    }
    # Grant ids that do not move when a source or a dataset joins (a renamed grant is replaced, revoking its pair):
    # the database's is the job's, each routed dataset's table grant is named by its dataset.
    ids = {k.rstrip("0123456789ABCDEF") for k, v in dev_on["Resources"].items()
           if v["Type"] == "AWS::LakeFormation::PrincipalPermissions" and k.startswith("LakeFormationJob")}
    assert ids == {"LakeFormationJobIngestDatabase", "LakeFormationJobClickstreamSourceTable",
                   "LakeFormationJobClickstreamLakeTable", "LakeFormationJobOrdersSourceTable",
                   "LakeFormationJobOrdersLakeTable", "LakeFormationJobEventsSourceTable",
                   "LakeFormationJobEventsLakeTablePageViews", "LakeFormationJobEventsLakeTableCheckouts"}
    # The reader role carries the dataset's reader policy and is output for the teams that assume it.
    policies = dev_on["Resources"][reader["orders"]]["Properties"]["ManagedPolicyArns"]
    assert [p["Ref"] for p in policies] == [k for k in _of_type(dev_on, "AWS::IAM::ManagedPolicy") if k.startswith("ReadersReaderPolicyOrders")]
    assert dev_on["Outputs"]["ReaderRoleArnOrders"]["Value"] == {"Fn::GetAtt": [reader["orders"], "Arn"]}


def test_grants_wait_for_the_registration_and_the_tables_and_run_one_at_a_time(dev_on):
    resources = dev_on["Resources"]
    grants = [k for k, v in resources.items() if v["Type"] == "AWS::LakeFormation::PrincipalPermissions"]
    (registration,) = _of_type(dev_on, "AWS::LakeFormation::Resource")
    tables = {k for k, v in resources.items() if v["Type"] == "AWS::Glue::Table"}
    for grant in grants:
        depends = set(resources[grant]["DependsOn"])
        assert registration in depends and tables <= depends
    # a chain: each grant after the first depends on exactly one other grant
    assert sorted(len(set(resources[g]["DependsOn"]) & set(grants)) for g in grants) == [0] + [1] * (len(grants) - 1)
    # the jobs start (the keeper's deploy resources) only once their grants exist
    deploys = [k for k, v in resources.items() if k.startswith("JobKeeperDeploy")]
    assert deploys and all(set(grants) <= set(resources[d].get("DependsOn", [])) for d in deploys)


def test_on_with_msk_grants_the_kafka_job_no_source_table(templates):
    """prod: clickstream from Kinesis, orders from MSK, whose job reads the topic itself (no catalog source table)."""
    prod = _synth("prod")
    kafka_job = _role_id(prod, "StreamingJobOrdersRole")
    mine = {resource: perms for (role, resource), perms in _grants(prod).items() if role == kafka_job}
    assert mine == {"streamlake_prod": ["DESCRIBE"], "streamlake_prod.orders": ["SELECT", "INSERT", "DESCRIBE"]}
    # beside the Lake Formation resources and the roles they need, nothing of prod changed
    added = set(prod["Resources"]) - set(templates["prod"]["Resources"])
    assert {prod["Resources"][k]["Type"] for k in added} == {
        "AWS::LakeFormation::Resource", "AWS::LakeFormation::PrincipalPermissions", "AWS::IAM::Role", "AWS::IAM::Policy"}


def test_the_template_with_lake_formation_on_is_cfn_lint_clean(dev_on, tmp_path):
    path = tmp_path / "dev-lake-formation.template.json"
    path.write_text(json.dumps(dev_on), encoding="utf-8")
    matches = _lint(path)
    assert [m for m in matches if m["Level"] == "Error"] == []
    assert [m for m in matches if m["Level"] == "Warning" and not _accepted(m)] == []


@pytest.fixture(scope="module")
def iceberg_root(tmp_path_factory):
    """datasets/ with orders switched to Iceberg through its dataset.json only."""
    from devtools.iceberg_demo import switch

    return switch(tmp_path_factory.mktemp("lake-formation-iceberg") / "datasets", "orders")


def test_an_iceberg_dataset_is_granted_by_name_only_once_its_table_exists(iceberg_root, monkeypatch):
    """The job creates an Iceberg table on its first run, and a grant on a table that does not exist fails: until the
    dataset is listed in iceberg_tables_created the job may create it (CREATE_TABLE, and DATA_LOCATION_ACCESS on its
    prefix), and nobody else is granted it; listed, the reader and the hourly maintenance get it by name."""
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(iceberg_root))
    before = _synth("dev")
    job, reader = _role_id(before, "StreamingJobIngestRole"), _role_id(before, "LakeFormationReaderRoleOrders")
    compaction = _role_id(before, "CompactionRole")
    (bucket_id,) = [k for k in before["Resources"] if k.startswith("StorageLakeBucket") and before["Resources"][k]["Type"] == "AWS::S3::Bucket"]
    location = f"location:{bucket_id}/orders"
    grants = _grants(before)
    assert {r: p for (who, r), p in grants.items() if who == job} == {  # its job "ingest" runs clickstream too
        "streamlake_dev": ["DESCRIBE", "CREATE_TABLE"], "streamlake_dev.source_orders": ["SELECT", "DESCRIBE"],
        location: ["DATA_LOCATION_ACCESS"], "streamlake_dev.source_clickstream": ["SELECT", "DESCRIBE"],
        "streamlake_dev.events": ["SELECT", "INSERT", "DESCRIBE"], "streamlake_dev.source_events": ["SELECT", "DESCRIBE"],
        "streamlake_dev.page_views": ["SELECT", "INSERT", "DESCRIBE"],
        "streamlake_dev.checkouts": ["SELECT", "INSERT", "DESCRIBE"]}
    assert {r for (who, r) in grants if who == reader} == {"streamlake_dev", "streamlake_dev.dead_letters_orders"}
    assert not [key for key in grants if key[0] == compaction]

    after = _grants(_synth("dev", iceberg_tables_created=["orders"]))
    assert set(after) - set(grants) == {(reader, "streamlake_dev.orders"), (compaction, "streamlake_dev"),
                                        (compaction, "streamlake_dev.orders"), (compaction, location)}
    assert after[(compaction, "streamlake_dev.orders")] == ["SELECT", "INSERT", "DELETE", "ALTER", "DESCRIBE"]
    assert after[(compaction, location)] == ["DATA_LOCATION_ACCESS"]
    assert after[(reader, "streamlake_dev.orders")] == ["SELECT", "DESCRIBE"]


def test_a_parquet_dataset_listed_as_a_created_iceberg_table_fails_synth_naming_the_field():
    with pytest.raises(ValueError, match=r"dev\.lake_formation\.iceberg_tables_created: \['orders'\] are not Iceberg datasets"):
        _synth("dev", iceberg_tables_created=["orders"])


def test_the_config_lists_every_lake_formation_problem_at_once():
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    raw = update_raw(raw, "dev", "lake_formation.iceberg_tables_created", ["orders", "orders"])
    raw = update_raw(raw, "prod", "lake_formation", {"enabled": "yes", "iceberg_tables_created": ["payments", "Bad"]})
    with pytest.raises(ConfigError) as raised:
        parse_config(raw)
    problems = raised.value.problems
    assert "dev.lake_formation.iceberg_tables_created: [\"orders\", \"orders\"] names a dataset more than once" in problems
    assert ("dev.lake_formation.iceberg_tables_created: [\"orders\", \"orders\"] has no effect while enabled is false "
            "(set enabled to true, or empty the list)") in problems
    assert "prod.lake_formation.enabled: 'yes' must be true or false" in problems
    assert "prod.lake_formation.iceberg_tables_created[1]: 'Bad' is not a dataset name (a folder under datasets/)" in problems
    assert ("prod.lake_formation.iceberg_tables_created: 'payments' is no dataset of this environment "
            "(its sources carry: clickstream, orders)") in problems
