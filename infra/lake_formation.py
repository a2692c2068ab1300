"""Lake Formation mode (config `lake_formation.enabled`, off by default; docs/lake-formation.md): the lake bucket
registered with Lake Formation, and every principal of the environment granted what it uses in the Data Catalog.

- Registration: AWS::LakeFormation::Resource on the lake bucket, through a role this construct creates (S3 read/write
  on the bucket, the data key), not the service-linked role: see `_register`.
- Grants, one AWS::LakeFormation::PrincipalPermissions each (see `_grant` for why not AWS::LakeFormation::Permissions):
  - each streaming job role: DESCRIBE on the database; SELECT, DESCRIBE on its Kinesis source table; SELECT, INSERT,
    DESCRIBE on its Parquet lake table, or, for an Iceberg dataset, CREATE_TABLE on the database and
    DATA_LOCATION_ACCESS on the dataset's prefix (the job creates the table and, as its creator, holds every
    permission on it);
  - the compaction role, for each Iceberg table in `lake_formation.iceberg_tables_created`: DESCRIBE on the database;
    SELECT, INSERT, DELETE, ALTER, DESCRIBE on the table; DATA_LOCATION_ACCESS on its prefix (Parquet datasets are
    compacted by path: no catalog call, no grant);
  - a reader role per dataset (created here, with the dataset's reader policy attached; see `_reader_role`):
    DESCRIBE on the database; SELECT, DESCRIBE on the lake table (an Iceberg one once created) and on each of its
    sources' dead-letter tables.
- DATA_LOCATION_ACCESS only where a principal creates or alters a table: "data location permissions control the
  ability to create Data Catalog resources that point to particular Amazon S3 locations ... When you grant the
  CREATE_TABLE or ALTER permission to a principal, you also grant data location permissions" (Lake Formation
  "Underlying data access control", https://docs.aws.amazon.com/lake-formation/latest/dg/access-control-underlying-data.html);
  "Amazon S3 locations are buckets or prefixes under a bucket" (same page), so each grant names the dataset's prefix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lakeformation as lakeformation
from aws_cdk import aws_s3 as s3
from constructs import Construct, IDependable

from infra.constants import pascal
from infra.nag import acknowledge_wildcard_resource

READ = ("SELECT", "DESCRIBE")
# What the hourly maintenance does to an Iceberg table through Iceberg's GlueCatalog: reads it, rewrites and removes
# data files, and commits each procedure as an UpdateTable of its metadata location (compaction/iceberg_maintenance.py).
MAINTAIN = ("SELECT", "INSERT", "DELETE", "ALTER", "DESCRIBE")
# The S3 actions Lake Formation's registration role needs on the location ("Requirements for roles used to register
# locations", https://docs.aws.amazon.com/lake-formation/latest/dg/registration-role.html: s3:PutObject, GetObject,
# DeleteObject on the objects, s3:ListBucket on the bucket).
REGISTRATION_OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")


@dataclass(frozen=True)
class DatasetGrants:
    """What Lake Formation is told about one dataset: its tables, its prefix and the roles of its streaming jobs."""

    table_format: str  # "parquet" | "iceberg"
    lake_table: str
    lake_prefix: str  # key prefix in the lake bucket
    source_tables: Mapping[str, str]  # source -> Kinesis source table (a Kafka source has none)
    dead_letter_tables: Mapping[str, str]  # folder under the dead-letter prefix (a source's) -> dead-letter table
    job_roles: Mapping[str, iam.IRole]  # source -> its streaming job's role
    job_names: Mapping[str, str]  # source -> its streaming job's name (a job of one source is named after it)
    reader_policy: iam.IManagedPolicy
    routed_sources: frozenset[str]  # those of job_roles' sources that are routed (carry several datasets)


class LakeFormation(Construct):
    def __init__(self, scope: Construct, id_: str, *, environment: str, database: str, lake_bucket: s3.IBucket,
                 data_key: kms.IKey, datasets: Mapping[str, DatasetGrants], compaction_role: iam.IRole,
                 iceberg_tables_created: Sequence[str], catalog_resources: Sequence[IDependable]) -> None:
        super().__init__(scope, id_)
        not_iceberg = sorted(d for d in iceberg_tables_created if datasets[d].table_format != "iceberg")
        if not_iceberg:
            raise ValueError(f"{environment}.lake_formation.iceberg_tables_created: {not_iceberg} are not Iceberg datasets "
                             "(their table_format is parquet: the stack creates their table, list only Iceberg ones)")
        stack = cdk.Stack.of(self)
        self._catalog_id = stack.account
        self._database = database
        self._catalog_resources = tuple(catalog_resources)
        self._previous: cdk.CfnResource | None = None
        self.grants: dict[str, lakeformation.CfnPrincipalPermissions] = {}
        self._granted: dict[tuple[str, str], lakeformation.CfnPrincipalPermissions] = {}
        self.reader_roles: dict[str, iam.Role] = {}
        self.registration = self._register(lake_bucket, data_key)
        created = set(iceberg_tables_created)
        maintained = []
        for dataset, grants in datasets.items():
            iceberg = grants.table_format == "iceberg"
            location = lake_bucket.arn_for_objects(grants.lake_prefix)
            for source, role in sorted(grants.job_roles.items()):
                who = f"Job{pascal(source)}"
                # The database grant is the job role's, whichever of its sources asks first: named by the job, so a
                # source or dataset added later does not rename, so replace, it (a rename revokes the pair, see _grant).
                self._grant(f"Job{pascal(grants.job_names[source])}Database", role, self._database_resource(),
                            ("DESCRIBE", "CREATE_TABLE") if iceberg else ("DESCRIBE",))
                if source in grants.source_tables:
                    self._grant(f"{who}SourceTable", role, self._table_resource(grants.source_tables[source]), READ)
                if iceberg:
                    self._grant(f"{who}Location", role, self._location_resource(location), ("DATA_LOCATION_ACCESS",))
                else:
                    # A routed source's role writes each of its datasets' tables: one grant each, named by the dataset
                    # from the start (a dataset joining the route later must not rename, so replace, another's grant:
                    # the replacement's delete would revoke the pair the new resource had just granted, see _grant).
                    table_id = f"{who}LakeTable{pascal(dataset)}" if source in grants.routed_sources else f"{who}LakeTable"
                    self._grant(table_id, role, self._table_resource(grants.lake_table), ("SELECT", "INSERT", "DESCRIBE"))
            readable = [grants.lake_table] if not iceberg or dataset in created else []
            if iceberg and dataset in created:
                maintained.append((dataset, grants.lake_table, location))
            reader = self._reader_role(dataset, grants.reader_policy)
            self.reader_roles[dataset] = reader
            who = f"Reader{pascal(dataset)}"
            self._grant(f"{who}Database", reader, self._database_resource(), ("DESCRIBE",))
            for table in readable:
                self._grant(f"{who}LakeTable", reader, self._table_resource(table), READ)
            for folder, table in sorted(grants.dead_letter_tables.items()):
                self._grant(f"{who}DeadLetterTable{pascal(folder.replace('/', '-'))}", reader, self._table_resource(table), READ)
        if maintained:
            self._grant("CompactionDatabase", compaction_role, self._database_resource(), ("DESCRIBE",))
        for dataset, table, location in maintained:
            self._grant(f"Compaction{pascal(dataset)}Table", compaction_role, self._table_resource(table), MAINTAIN)
            self._grant(f"Compaction{pascal(dataset)}Location", compaction_role, self._location_resource(location),
                        ("DATA_LOCATION_ACCESS",))

    def _register(self, lake_bucket: s3.IBucket, data_key: kms.IKey) -> lakeformation.CfnResource:
        """The lake bucket registered through a role of this stack.

        A user-defined role rather than UseServiceLinkedRole: the bucket is SSE-KMS with the environment's customer
        managed key, and Lake Formation reads and writes it as the registering role ("Lake Formation assumes that role
        when accessing the data in that location", "Requirements for roles used to register locations",
        https://docs.aws.amazon.com/lake-formation/latest/dg/registration-role.html), so that role must be able to use
        the key ("Registering an encrypted Amazon S3 location" is that guide's page for it). This role is granted the key
        in its own policy, next to the bucket; the service-linked role would need a key policy statement naming
        AWSServiceRoleForLakeFormationDataAccess, a role Lake Formation creates on the first registration (RegisterResource
        API: "When you register the first Amazon S3 path, the service-linked role ... are created on your behalf"),
        which may not exist when this stack's key policy is written (that KMS refuses a policy naming a missing role:
        unverified here). The trust policy names lakeformation.amazonaws.com (same page).
        """
        role = iam.Role(self, "RegistrationRole", assumed_by=iam.ServicePrincipal("lakeformation.amazonaws.com"),
                        description="Lake Formation reads and writes the lake bucket as this role (registered location)")
        objects = lake_bucket.arn_for_objects("*")
        policy = iam.Policy(self, "RegistrationPolicy", roles=[role], statements=[
            iam.PolicyStatement(sid="ReadWriteTheLake", actions=list(REGISTRATION_OBJECT_ACTIONS), resources=[objects]),
            iam.PolicyStatement(sid="ListTheLake", actions=["s3:ListBucket"], resources=[lake_bucket.bucket_arn]),
            iam.PolicyStatement(sid="UseTheDataKey", actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                                resources=[data_key.key_arn]),
        ])
        acknowledge_wildcard_resource(policy, objects, "Lake Formation vends credentials for every table under the "
                                      "registered lake bucket; the objects are the datasets' files, created at run time")
        # AWS::LakeFormation::Resource (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lakeformation-resource.html):
        # ResourceArn, the location (here the bucket: every dataset's prefix is below it), is its only create-only
        # property (createOnlyProperties in the resource schema cfn-lint bundles: devtools/cfn_schema.py), so a new
        # bucket replaces the registration. UseServiceLinkedRole is required by that schema; false with RoleArn.
        # HybridAccessEnabled and WithFederation stay unset (not hybrid access mode, not a federated location).
        registration = lakeformation.CfnResource(self, "LakeLocation", resource_arn=lake_bucket.bucket_arn,
                                                 use_service_linked_role=False, role_arn=role.role_arn)
        registration.node.add_dependency(policy)  # Lake Formation uses the role from the first grant on
        return registration

    def _reader_role(self, dataset: str, policy: iam.IManagedPolicy) -> iam.Role:
        """One role per dataset that Lake Formation grants to, with the dataset's reader policy attached.

        Lake Formation grants name principals (DataLakePrincipalIdentifier: an IAM user or role ARN, among others), and
        a managed policy is none. A role of the stack keeps each grant stable: teams' own roles would be a config list
        whose every change replaces grants (their properties are all create-only); here who may read is who may
        assume this role, an IAM question the account answers (the trust names the account: a principal needs
        sts:AssumeRole on this role's ARN in its own policy). The policy stays attachable as before.
        """
        return iam.Role(self, f"ReaderRole{pascal(dataset)}", assumed_by=iam.AccountRootPrincipal(),
                        description=f"Readers of dataset {dataset}: the Lake Formation grants name this role",
                        managed_policies=[policy])

    def _grant(self, id_: str, role: iam.IRole, resource: lakeformation.CfnPrincipalPermissions.ResourceProperty,
               permissions: Sequence[str]) -> None:
        """One AWS::LakeFormation::PrincipalPermissions (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lakeformation-principalpermissions.html).

        PrincipalPermissions, not AWS::LakeFormation::Permissions: the latter's page says "New versions of AWS Lake
        Formation permission resources are now available. For more information, see:
        AWS::LakeFormation::PrincipalPermissions", and the same page warns that removing a stack fails when the principal
        no longer holds the permissions it references ("you can't call revoke on non-existing permissions"). Every property of PrincipalPermissions
        (Catalog, Principal, Resource, Permissions, PermissionsWithGrantOption) is "Update requires: Replacement"
        (same page; createOnlyProperties in the resource schema), and its identifier is the principal-resource pair
        (primaryIdentifier PrincipalIdentifier + ResourceIdentifier): `make diff` labels what a change does
        (devtools/diff.py, docs/lake-formation.md "Changing a grant"). "When you delete a PrincipalPermissions
        resource, the permissions on principal-resource pair are revoked" (same page).

        The grants are created one after the other: several GrantPermissions at once can fail with a
        ConcurrentModificationException (aws-cloudformation/cloudformation-coverage-roadmap#2432, and #2500 for
        PrincipalPermissions created together); that CloudFormation serializes them through DependsOn is CloudFormation's
        documented ordering, that it avoids the exception is unverified.
        """
        # One grant per principal and resource: a job that runs several sources (streaming_jobs) needs the database
        # once, and its sources' permissions on it merged. Two resources on one pair would share its identifier, and
        # deleting either would revoke the pair's permissions for both (same page).
        key = (role.node.path, json.dumps(cdk.Stack.of(self).resolve(resource), sort_keys=True))
        if key in self._granted:
            merged = self._granted[key]
            merged.permissions = [*merged.permissions, *(p for p in permissions if p not in merged.permissions)]
            return
        grant = lakeformation.CfnPrincipalPermissions(
            self, id_,
            principal=lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
                data_lake_principal_identifier=role.role_arn),
            resource=resource, permissions=list(permissions), permissions_with_grant_option=[])
        # Grants name catalog objects and the location by name: they exist first ("For a grant to succeed, you must
        # first register the data location with Lake Formation", "Granting data location permissions",
        # https://docs.aws.amazon.com/lake-formation/latest/dg/granting-location-permissions.html).
        grant.node.add_dependency(*self._catalog_resources)
        grant.node.add_dependency(self.registration)
        if self._previous is not None:
            grant.node.add_dependency(self._previous)
        self._previous = grant
        self.grants[id_] = grant
        self._granted[key] = grant

    def _database_resource(self) -> lakeformation.CfnPrincipalPermissions.ResourceProperty:
        return lakeformation.CfnPrincipalPermissions.ResourceProperty(
            database=lakeformation.CfnPrincipalPermissions.DatabaseResourceProperty(
                catalog_id=self._catalog_id, name=self._database))

    def _table_resource(self, table: str) -> lakeformation.CfnPrincipalPermissions.ResourceProperty:
        return lakeformation.CfnPrincipalPermissions.ResourceProperty(
            table=lakeformation.CfnPrincipalPermissions.TableResourceProperty(
                catalog_id=self._catalog_id, database_name=self._database, name=table))

    def _location_resource(self, arn: str) -> lakeformation.CfnPrincipalPermissions.ResourceProperty:
        return lakeformation.CfnPrincipalPermissions.ResourceProperty(
            data_location=lakeformation.CfnPrincipalPermissions.DataLocationResourceProperty(
                catalog_id=self._catalog_id, resource_arn=arn))
