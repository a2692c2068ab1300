"""What CloudFormation does with a property change, from the resource provider schemas cfn-lint bundles
(us-east-1; the `createOnlyProperties` of each type: "a change to any of these properties requires
replacing the resource", CloudFormation CLI resource schema reference).

    replacement_paths("AWS::MSK::Configuration")  -> (("KafkaVersionsList",), ("Name",))

A replaced resource that keeps a name it sets itself cannot be created beside the old one, so such a
deploy fails ("deploy will fail"); a replaced stateful resource loses what it holds ("data loss").
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from importlib import resources

# Types whose replacement loses data (objects, records, keys, brokers' logs, registered schema versions).
STATEFUL_TYPES = frozenset({
    "AWS::S3::Bucket", "AWS::Kinesis::Stream", "AWS::MSK::Cluster", "AWS::MSK::ServerlessCluster",
    "AWS::KMS::Key", "AWS::Logs::LogGroup", "AWS::Glue::Registry", "AWS::Glue::Schema", "AWS::Glue::SchemaVersion",
    "AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::MSK::Topic",
})
_INDEX = re.compile(r"\[\d+\]")


@lru_cache(maxsize=1)
def _providers() -> tuple[dict, object]:
    schemas = resources.files("cfnlint.data.schemas")
    return json.loads(schemas.joinpath("providers").joinpath("us-east-1.json").read_text(encoding="utf-8")), schemas


@cache
def replacement_paths(resource_type: str) -> tuple[tuple[str, ...], ...]:
    """The create-only property paths of a type (array steps `*` dropped); () for a type the schemas lack."""
    index, schemas = _providers()
    name = index.get(resource_type)
    if name is None:
        return ()
    schema = json.loads(schemas.joinpath("resources").joinpath(f"{name}.json").read_text(encoding="utf-8"))
    paths = []
    for pointer in schema.get("createOnlyProperties", []):
        steps = [step for step in pointer.split("/")[2:] if step != "*"]  # "/properties/A/B" -> A, B
        paths.append(tuple(steps))
    return tuple(paths)


def property_steps(path: str) -> tuple[str, ...]:
    """A flattened template path (`Properties.TableInput.Columns[7].Name`) as property steps."""
    if not path.startswith("Properties."):
        return ()
    return tuple(_INDEX.sub("", path.removeprefix("Properties.")).split("."))


def replacing_path(resource_type: str, changed_path: str) -> tuple[str, ...] | None:
    """The create-only path a change reaches (the change is at or below it), or None: updated in place."""
    steps = property_steps(changed_path)
    for create_only in replacement_paths(resource_type):
        if steps[: len(create_only)] == create_only:
            return create_only
    return None


# Create-only properties ending in `Name` that name something else (a VPC endpoint's ServiceName is the
# AWS service it connects to): replacing such a resource under the same value clashes with nothing.
NOT_RESOURCE_NAMES = frozenset({"ServiceName"})
# Names that are labels, not identifiers: an Athena saved query is identified by the NamedQueryId that
# CreateNamedQuery returns, its Name being "the plain language name for the query" with no uniqueness rule in the
# API reference (that a second query of the same name is accepted: unverified on AWS).
LABEL_NAMES = frozenset({("AWS::Athena::NamedQuery", "Name")})


def name_paths(resource_type: str) -> tuple[tuple[str, ...], ...]:
    """Create-only paths that name the resource (their last step ends in `Name`)."""
    return tuple(p for p in replacement_paths(resource_type)
                 if p and p[-1].endswith("Name") and p[-1] not in NOT_RESOURCE_NAMES
                 and (resource_type, p[-1]) not in LABEL_NAMES)
