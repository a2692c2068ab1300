"""Storage: the data key and five buckets (encryption, TLS, public access, versioning, lifecycle, logging)."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from infra.config import load_config
from infra.storage import Storage
from tests.infra.bare import bare_stack


def _build(env_name: str, removal_policy: cdk.RemovalPolicy):
    stack = bare_stack("Storage")
    storage = Storage(
        stack, "Storage", project="streamlake", environment=env_name,
        settings=load_config().get(env_name).storage, removal_policy=removal_policy,
    )
    return stack, storage, assertions.Template.from_stack(stack)


@pytest.fixture(scope="module")
def built():
    return _build("dev", cdk.RemovalPolicy.DESTROY)


def _id(stack, construct) -> str:
    return stack.get_logical_id(construct.node.default_child)


def _bucket(template, logical_id) -> dict:
    return template.to_json()["Resources"][logical_id]


def test_data_key_rotates(built):
    _, _, template = built
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_data_buckets_are_kms_encrypted_private_versioned_and_logged(built):
    stack, storage, template = built
    key_arn = {"Fn::GetAtt": [_id(stack, storage.data_key), "Arn"]}
    log_bucket = {"Ref": _id(stack, storage.access_log_bucket)}
    for name, bucket in (("lake", storage.lake_bucket), ("dead-letters", storage.dead_letter_bucket),
                         ("checkpoints", storage.checkpoint_bucket), ("job-assets", storage.job_assets_bucket)):
        props = _bucket(template, _id(stack, bucket))["Properties"]
        assert props["BucketEncryption"] == {"ServerSideEncryptionConfiguration": [{
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {"KMSMasterKeyID": key_arn, "SSEAlgorithm": "aws:kms"},
        }]}, name
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
        }, name
        assert props["VersioningConfiguration"] == {"Status": "Enabled"}, name
        assert props["LoggingConfiguration"] == {"DestinationBucketName": log_bucket, "LogFilePrefix": f"s3-access/{name}/"}, name
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}, name


def test_access_log_bucket_is_s3_managed_because_access_logging_cannot_use_sse_kms(built):
    stack, storage, template = built
    props = _bucket(template, _id(stack, storage.access_log_bucket))["Properties"]
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert props["LifecycleConfiguration"] == {"Rules": [
        {"Id": "ExpireLogs", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}, "ExpirationInDays": 90, "Status": "Enabled"},
    ]}
    assert "LoggingConfiguration" not in props


def test_every_bucket_denies_plain_http(built):
    _, _, template = built
    policies = template.find_resources("AWS::S3::BucketPolicy")
    assert len(policies) == 5
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        )


def test_lifecycle_rules_come_from_config(built):
    stack, storage, template = built
    rules = lambda bucket: _bucket(template, _id(stack, bucket))["Properties"]["LifecycleConfiguration"]["Rules"]  # noqa: E731
    assert rules(storage.lake_bucket) == [
        {"Id": "ExpireReplacedLakeFiles", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 30}, "Status": "Enabled"},
        {"Id": "RemoveExpiredDeleteMarkers", "ExpiredObjectDeleteMarker": True, "Status": "Enabled"},
    ]
    assert rules(storage.dead_letter_bucket) == [
        {"Id": "AgeDeadLetters", "ExpirationInDays": 365, "Prefix": "dead_letters/", "Status": "Enabled",
         "Transitions": [{"StorageClass": "STANDARD_IA", "TransitionInDays": 30}]},
        {"Id": "ExpireNoncurrentDeadLetters", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 30}, "Status": "Enabled"},
        {"Id": "RemoveExpiredDeleteMarkers", "ExpiredObjectDeleteMarker": True, "Status": "Enabled"},
    ]
    assert rules(storage.checkpoint_bucket) == [
        {"Id": "ExpireTemp", "ExpirationInDays": 7, "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
         "Prefix": "glue-temp/", "Status": "Enabled"},
        {"Id": "ExpireOldCheckpoints", "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
         "Prefix": "checkpoints/", "Status": "Enabled"},
        {"Id": "AbortMultipart", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}, "Status": "Enabled"},
        {"Id": "RemoveExpiredDeleteMarkers", "ExpiredObjectDeleteMarker": True, "Status": "Enabled"},
    ]


def test_every_versioned_bucket_removes_expired_delete_markers(built):
    """Noncurrent versions expire in every versioned bucket; the delete markers left behind (Spark deletes
    checkpoint files every batch, compaction deletes replaced lake files) must go too, or listings slow."""
    stack, storage, template = built
    for name, bucket in storage.buckets.items():
        props = _bucket(template, _id(stack, bucket))["Properties"]
        if props.get("VersioningConfiguration", {}).get("Status") != "Enabled":
            continue
        rules = props["LifecycleConfiguration"]["Rules"]
        assert {"Id": "RemoveExpiredDeleteMarkers", "ExpiredObjectDeleteMarker": True, "Status": "Enabled"} in rules, name


def test_prefixes_are_the_ones_the_jobs_use(built):
    _, storage, _ = built
    assert (storage.lake_prefix, storage.dead_letter_prefix, storage.checkpoint_prefix, storage.temp_prefix) == (
        "events", "dead_letters", "checkpoints", "glue-temp",
    )
    assert storage.temp_bucket is storage.checkpoint_bucket


@pytest.mark.parametrize("policy,expected", [(cdk.RemovalPolicy.RETAIN, "Retain"), (cdk.RemovalPolicy.DESTROY, "Delete")])
def test_removal_policy_applies_to_key_and_every_bucket(policy, expected):
    _, _, template = _build("prod" if expected == "Retain" else "dev", policy)
    resources = template.to_json()["Resources"].values()
    kept = [r for r in resources if r["Type"] in ("AWS::S3::Bucket", "AWS::KMS::Key")]
    assert len(kept) == 6
    assert {(r["DeletionPolicy"], r["UpdateReplacePolicy"]) for r in kept} == {(expected, expected)}
    # No auto-delete custom resource: a non-empty bucket stops `cdk destroy` instead.
    assert not [r for r in resources if r["Type"].startswith("Custom::")]


@pytest.mark.parametrize("environment", ["dev", "prod"])
def test_each_dataset_prefix_drops_the_jobs_transient_versions_in_a_day_and_ages_its_data_as_configured(templates, environment):
    """Per dataset prefix of the lake bucket (infra/storage.Storage.add_lake_prefix_rules): the staged batch files,
    compaction's control folder and the partitions log keep noncurrent versions 1 day (the bucket-wide rule keeps
    replaced table files `lake_noncurrent_expiration_days`); prod moves data files to Standard-IA at 90 days."""
    from compaction.layout import CONTROL_DIR
    from glue_jobs.commit import STAGING_DIR
    from glue_jobs.lake.partitions_log import LOG_DIR
    from infra.config import load_config
    from infra.storage import lake_prefix_of

    config = load_config().get(environment)
    (lake,) = [v for k, v in templates[environment]["Resources"].items()
               if v["Type"] == "AWS::S3::Bucket" and k.startswith("StorageLakeBucket")]
    rules = lake["Properties"]["LifecycleConfiguration"]["Rules"]
    by_prefix = {r.get("Prefix"): r for r in rules}
    assert {r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in rules if r.get("Prefix") is None
            and "NoncurrentVersionExpiration" in r} == {config.storage.lake_noncurrent_expiration_days}
    for dataset in config.datasets:
        prefix = lake_prefix_of(dataset)
        for directory in (STAGING_DIR, CONTROL_DIR, LOG_DIR):
            rule = by_prefix[f"{prefix}/{directory}/"]
            assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1} and "ExpirationInDays" not in rule
        aging = by_prefix.get(f"{prefix}/event_date=")
        if config.storage.lake_infrequent_access_days is None:
            assert aging is None
        else:
            assert aging["Transitions"] == [{"StorageClass": "STANDARD_IA", "TransitionInDays": 90}]
