"""What CloudFormation would deploy, read from a synthesized cloud assembly: per Glue job its script and
extra-py-files assets, its DefaultArguments with the CloudFormation expressions resolved, and the
catalog tables and alarms the rehearsal checks against.

The resolver knows the intrinsic functions the templates use (Ref, Fn::GetAtt, Fn::Join, Fn::Sub,
Fn::Select, Fn::Split) and nothing else: an expression it does not know fails the rehearsal.
Resources resolve to stand-in names (a bucket's Ref is `rehearsal-<logical id>`), which
`LocalS3.path` turns into local directories.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"
REGION = "eu-west-1"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "rehearsal",
    # arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<uuid> (CloudFormation pseudo parameters)
    "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/rehearsal/5f1e2d3c-0a1b-4c2d-9e8f-123456789abc",
    "AWS::NoValue": None,
}
_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


class RehearsalError(Exception):
    """The assembly cannot be rehearsed as it is (a missing asset, an unknown expression or argument)."""


@dataclass(frozen=True)
class GlueJob:
    logical_id: str
    command: str  # gluestreaming or glueetl
    glue_version: str
    script: Path  # the script asset CloudFormation uploads
    extra_py_files: tuple[Path, ...]  # the zip asset(s)
    extra_jars: tuple[Path, ...]  # --extra-jars asset(s): the Kafka job's frame decoder
    arguments: dict[str, str]  # DefaultArguments, resolved (s3:// locations still as S3 URIs)

    @property
    def sources(self) -> list[JobSource]:
        """A streaming job's sources (`--sources`, glue_jobs/job_arguments.py job_sources), in order; none for a batch job."""
        if "--sources" not in self.arguments:
            return []
        job = {name: value for name, value in self.arguments.items() if name != "--sources"}
        return [JobSource(self, {**job, **{f"--{key}": value for key, value in source.items()}})
                for source in json.loads(self.arguments["--sources"])]


@dataclass(frozen=True)
class JobSource:
    """One source of a streaming job: the job, and the arguments the source runs with (the job's, `--sources` left out,
    with the source's keys as `--name`)."""

    job: GlueJob
    arguments: dict[str, str]

    @property
    def name(self) -> str:
        return self.arguments["--source_name"]

    @property
    def logical_id(self) -> str:
        return self.job.logical_id


@dataclass
class Assembly:
    environment: str
    directory: Path
    template: dict
    assets: dict[str, Path] = field(default_factory=dict)  # S3 object key -> file in the assembly
    directories: dict[str, Path] = field(default_factory=dict)  # S3 object key of a zipped asset -> its folder

    # ---- CloudFormation expressions ----------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str | int | float | bool) or value is None:
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            raise RehearsalError(f"unexpected template value {value!r}")
        if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
            return {k: self.resolve(v) for k, v in value.items()}
        ((function, argument),) = value.items()
        if function == "Ref":
            return self.ref(argument)
        if function == "Fn::GetAtt":
            resource, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return self.get_att(resource, attribute)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(str(self.resolve(p)) for p in self.resolve(parts))
        if function == "Fn::Select":
            index, items = argument
            return self.resolve(items)[int(self.resolve(index))]
        if function == "Fn::Split":
            separator, text = argument
            return str(self.resolve(text)).split(separator)
        if function == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            return _SUB_VARIABLE.sub(lambda m: str(self._sub_variable(m.group(1), variables)), text)
        raise RehearsalError(f"the rehearsal does not resolve {function} ({json.dumps(value)[:200]})")

    def ref(self, name: str) -> Any:
        if name in PSEUDO:
            return PSEUDO[name]
        resources = self.template.get("Resources", {})
        if name not in resources:
            raise RehearsalError(f"Ref to {name}, which the template does not declare")
        properties = resources[name].get("Properties", {})
        named = properties.get("DatabaseInput", properties)  # AWS::Glue::Database's Ref is DatabaseInput.Name
        for key in ("Name", "BucketName", "StreamName", "TopicName"):
            if named.get(key) is not None:
                return self.resolve(named[key])
        return f"rehearsal-{name.lower()}"

    def get_att(self, resource: str, attribute: str) -> str:
        if resource not in self.template.get("Resources", {}):
            raise RehearsalError(f"Fn::GetAtt on {resource}, which the template does not declare")
        return f"arn:aws:rehearsal:{REGION}:{ACCOUNT}:{self.ref(resource)}/{attribute}"

    def _sub_variable(self, name: str, variables: dict) -> Any:
        if name in variables:
            return self.resolve(variables[name])
        if "." in name:
            return self.get_att(*name.split(".", 1))
        return self.ref(name)

    # ---- what the rehearsal runs -------------------------------------------------------------------

    def resources(self, resource_type: str) -> dict[str, dict]:
        return {k: v for k, v in self.template.get("Resources", {}).items() if v["Type"] == resource_type}

    def asset(self, s3_uri: str) -> Path:
        """The assembly file CloudFormation uploads to `s3_uri` (an asset's bucket/key)."""
        key = s3_uri.split("/", 3)[-1]
        if key not in self.assets:
            raise RehearsalError(f"{s3_uri}: no asset of the assembly is uploaded there (known keys: {sorted(self.assets)})")
        return self.assets[key]

    def glue_jobs(self) -> list[GlueJob]:
        jobs = []
        for logical_id, resource in sorted(self.resources("AWS::Glue::Job").items()):
            properties = resource["Properties"]
            arguments = {k: str(v) for k, v in self.resolve(properties.get("DefaultArguments", {})).items()}
            extra, jars = arguments.get("--extra-py-files", ""), arguments.get("--extra-jars", "")
            jobs.append(GlueJob(
                logical_id=logical_id,
                command=properties["Command"]["Name"],
                glue_version=properties.get("GlueVersion", ""),
                script=self.asset(self.resolve(properties["Command"]["ScriptLocation"])),
                extra_py_files=tuple(self.asset(uri) for uri in extra.split(",") if uri),
                extra_jars=tuple(self.asset(uri) for uri in jars.split(",") if uri),
                arguments=arguments,
            ))
        return jobs

    def catalog_table(self, database: str, table: str) -> dict:
        """The synthesized AWS::Glue::Table's TableInput, resolved."""
        for resource in self.resources("AWS::Glue::Table").values():
            properties = self.resolve(resource["Properties"])
            table_input = properties["TableInput"]
            if properties["DatabaseName"] == database and table_input["Name"] == table:
                return table_input
        raise RehearsalError(f"table {database}.{table} is not in the {self.environment} template")

    def registered_versions(self, registry: str, schema_name: str) -> list[str]:
        """Every SchemaDefinition the template registers for a schema, in version order: the AWS::Glue::Schema's
        (version 1), then its AWS::Glue::SchemaVersion resources along their DependsOn chain (infra/catalog.py)."""
        schemas = {logical: r for logical, r in self.resources("AWS::Glue::Schema").items()
                   if self.resolve(r["Properties"])["Name"] == schema_name}
        if len(schemas) != 1:
            raise RehearsalError(f"schema {registry}/{schema_name}: {len(schemas)} AWS::Glue::Schema resources in the template")
        (logical, schema), = schemas.items()
        definitions, previous = [self.resolve(schema["Properties"])["SchemaDefinition"]], logical
        versions = {k: v for k, v in self.resources("AWS::Glue::SchemaVersion").items()
                    if v["Properties"]["Schema"].get("SchemaArn") == {"Fn::GetAtt": [logical, "Arn"]}}
        while versions:
            following = [k for k, v in versions.items() if previous in (v.get("DependsOn") or [])]
            if len(following) != 1:
                raise RehearsalError(f"schema {schema_name}: versions {sorted(versions)} do not follow {previous} one by one")
            previous = following[0]
            definitions.append(self.resolve(versions.pop(previous)["Properties"])["SchemaDefinition"])
        return definitions


def load(cdk_out: Path, environment: str) -> Assembly:
    """The stage `environment` of a synthesized app (cdk.out/assembly-<environment>/)."""
    directory = Path(cdk_out) / f"assembly-{environment}"
    manifest_path = directory / "manifest.json"
    if not manifest_path.exists():
        raise RehearsalError(f"{manifest_path} not found: synthesize first (make synth)")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    if len(stacks) != 1:
        raise RehearsalError(f"{directory}: expected one stack, found {len(stacks)}")
    template = json.loads((directory / stacks[0]["properties"]["templateFile"]).read_text(encoding="utf-8"))
    assembly = Assembly(environment, directory, template)
    for artifact in manifest["artifacts"].values():
        if artifact["type"] != "cdk:asset-manifest":
            continue
        assets = json.loads((directory / artifact["properties"]["file"]).read_text(encoding="utf-8"))
        for entry in assets.get("files", {}).values():
            source = directory / entry["source"]["path"]
            # A folder asset (a Lambda function's code) is uploaded as a zip of the folder.
            target = assembly.assets if entry["source"].get("packaging", "file") == "file" else assembly.directories
            for destination in entry["destinations"].values():
                target[destination["objectKey"]] = source
    return assembly
