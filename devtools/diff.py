"""Readable infrastructure diff for pull requests, without AWS credentials.

    python -m devtools.diff [--base REF] [--out FILE]     # make diff [BASE=origin/main]

Synthesizes every environment from the working tree and compares each template with the snapshot
committed at REF (default HEAD), and the config at REF with the working-tree config for the cost
delta. Prints Markdown per environment: security-relevant changes first (IAM, security groups, key
and resource policies), then resources added / removed / replaced / modified with the changed
properties, then the monthly fixed cost from config/prices.json: the delta at maximum workers (what the bill can
reach), and the range auto scaling moves in (minimum to maximum streaming workers).

Every modified resource is labelled from the CloudFormation resource schemas (devtools/cfn_schema.py): in
place, or replaced because a change reaches a create-only property. A replacement of a resource that keeps
a name it sets itself is labelled "deploy will fail" (CloudFormation creates the new resource before it
deletes the old one, and the name is taken), and the command exits 3 after writing the report; a
replacement or removal of a stateful resource is labelled "data loss" and the command exits 4 unless
--allow-data-loss (an MSK cluster replaced loses the records no job has read yet and strands the jobs' offsets).
A replaced Lake Formation grant is labelled "grant replaced" (every property of AWS::LakeFormation::PrincipalPermissions
is create-only), and one replaced on the same principal and resource, or moved to a new logical id on them, "deploy
will fail" (docs/lake-formation.md).
Catalog table columns are compared by name.

IAM policy statements (any `Statement` list of a policy document: IAM policies, roles' trust policies, bucket, key,
topic and queue policies) are compared as statements, not by their index in the list, so one statement added shows
as one added statement and not as every later statement changed. They are paired in this order:
1. by Sid, where a statement on each side has the same one;
2. identical statements (Action, Resource and the other lists compared as sets) pair as unchanged;
3. a remaining statement pairs with the remaining statement on the other side that has the same Effect and the same
   Action or the same Resource (NotAction, NotResource and Principal counted with them): of several, the one sharing
   the most keys, then the first in list order. It shows as that statement changed, field by field;
4. whatever is left is a removed statement and an added one, each shown whole.
A statement is named by its Sid (`Statement[Sid=ReadLake]`), else by its position in the new list (`Statement[4]`,
`Statement[4, was 3]` when it moved; `Statement[was 3]` for a removed one).

Values are shown whole. A long value (over MAX_VALUE_CHARS characters) or a long JSON string (a schema definition)
is shown as a unified diff of its two indented JSON renderings, with the first character at which the compact
renderings differ; a changed list of strings (Action, Resource) also names the items added and removed.

Every changed setting of a resource type with priced settings (Kinesis streams, MSK clusters, Glue jobs, NAT gateways,
interface endpoints) carries its price: the monthly change in USD when it is fixed capacity (each setting priced
alone against the old settings; the resource's total change on its heading when several are), the rate per unit
when it is billed by usage (an on-demand stream's retention, a batch Glue job's DPU-hours), or "not priced". An added
or removed resource of such a type carries its monthly price. IAM statements and other types' settings cost nothing
by themselves and carry no price; the report's footer says so.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from devtools import cfn_schema, sizing
from devtools.snapshot import normalize, snapshot_path
from infra.config import REPO_ROOT, ConfigError, ProjectConfig, load_config, parse_config
from infra.job_keeper import STOP_STATEMENTS

SECURITY_TYPES = (
    "AWS::IAM::",
    "AWS::EC2::SecurityGroup",
    "AWS::KMS::Key",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::Lambda::Permission",
    "AWS::LakeFormation::",
)
MAX_VALUE_CHARS = 90
# Lake Formation grants: the properties that make up their identifier. AWS::LakeFormation::PrincipalPermissions'
# primaryIdentifier is PrincipalIdentifier + ResourceIdentifier (the resource schema cfn-lint bundles), read-only
# properties CloudFormation derives from Principal and Resource; "When you delete a PrincipalPermissions resource, the
# permissions on principal-resource pair are revoked" (its CloudFormation page). For AWS::LakeFormation::Permissions,
# DataLakePrincipal and Resource are its create-only properties (the same schemas). A replacement keeping both is created
# beside the old grant under the same identifier: the handler answers AlreadyExists for an identifier it already tracks
# (aws-cloudformation/cloudformation-coverage-roadmap#2500 shows that error for PrincipalPermissions); that it does so for
# a replacement is unverified, and the other outcome, the old grant's delete revoking what both grant, is no better.
GRANT_IDENTITY = {
    "AWS::LakeFormation::PrincipalPermissions": (("Principal",), ("Resource",)),
    "AWS::LakeFormation::Permissions": (("DataLakePrincipal",), ("Resource",)),
}


@dataclass
class ResourceChange:
    logical_id: str
    type: str
    kind: str  # added | removed | modified | replaced
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    replacing: list[str] = field(default_factory=list)  # the create-only properties the changes reach
    fixed_name: str | None = None  # "Name=value" when a replaced resource keeps the name it sets
    columns: list[str] = field(default_factory=list)  # catalog table columns added / removed / retyped
    same_grantee: bool = False  # a replaced grant keeps its principal and resource (its identifier)
    moved_from: str | None = None  # an added grant on the principal and resource of a removed one: its logical id
    prices: dict[str, str] = field(default_factory=dict)  # changed path -> its price tag (price_setting)
    price: str | None = None  # the resource's own price tag: added / removed, or its total change
    refused_checkpoints: list[str] = field(default_factory=list)  # a streaming job's sources whose checkpoint it refuses

    @property
    def security(self) -> bool:
        return self.type.startswith(SECURITY_TYPES)

    @property
    def grant_replaced(self) -> bool:
        return self.kind == "replaced" and self.type in GRANT_IDENTITY

    @property
    def deploy_fails(self) -> bool:
        return (self.kind == "replaced" and (self.fixed_name is not None or self.same_grantee)) or (
            self.kind == "added" and self.moved_from is not None) or bool(self.refused_checkpoints)

    @property
    def data_loss(self) -> bool:
        return self.kind in ("replaced", "removed") and self.type in cfn_schema.STATEFUL_TYPES


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value and not (len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(_flatten(value[key], f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, (dict, list)) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


# ---- IAM policy statements: matched by Sid or content (module docstring), not by index.

_LABEL = re.compile(r"\[[^\]]*\]")
_SET_KEYS = ("Action", "NotAction", "Resource", "NotResource")
_WHAT = (("Action", "NotAction"), ("Resource", "NotResource", "Principal", "NotPrincipal"))


def _is_statements(value: Any) -> bool:
    return (isinstance(value, list) and bool(value) and all(isinstance(s, dict) for s in value)) or (
        isinstance(value, dict) and ("Effect" in value or "Action" in value))


def _split_statements(value: Any, prefix: str = "") -> tuple[Any, dict[str, list[dict]]]:
    """The value without its policy statements, and {flattened path of each Statement list: its statements}; the paths
    are named as _flatten names them."""
    found: dict[str, list[dict]] = {}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            if key == "Statement" and _is_statements(item):
                found[path] = item if isinstance(item, list) else [item]
                continue
            out[key], inner = _split_statements(item, path)
            found.update(inner)
        return out, found
    if isinstance(value, list) and value and all(isinstance(v, (dict, list)) for v in value):
        items = []
        for i, item in enumerate(value):
            stripped, inner = _split_statements(item, f"{prefix}[{i}]")
            items.append(stripped)
            found.update(inner)
        return items, found
    return value, found


def _canonical(value: Any) -> str:
    """A statement (or one of its fields) as text, with Action, Resource and the like compared as sets."""
    if isinstance(value, dict):
        value = {k: (sorted({json.dumps(x, sort_keys=True) for x in ([v] if not isinstance(v, list) else v)})
                     if k in _SET_KEYS else v) for k, v in value.items()}
    return json.dumps(value, sort_keys=True)


def _similarity(old: dict, new: dict) -> int:
    """0 when two statements do not pair (another Effect, or neither what they allow nor what they allow it on is the
    same); else 1 + the number of keys with the same value."""
    if old.get("Effect") != new.get("Effect"):
        return 0
    def equal(key: str) -> bool:
        return _canonical({key: old.get(key)}) == _canonical({key: new.get(key)})

    if not any(all(equal(k) for k in group) for group in _WHAT):
        return 0
    return 1 + sum(equal(k) for k in set(old) | set(new))


def pair_statements(old: list[dict], new: list[dict]) -> list[tuple[int | None, int | None]]:
    """(old index, new index) pairs, None for a statement only on one side, in the order of the module docstring."""
    pairs: list[tuple[int | None, int | None]] = []
    left_old, left_new = list(range(len(old))), list(range(len(new)))

    def take(o: int, n: int) -> None:
        pairs.append((o, n))
        left_old.remove(o)
        left_new.remove(n)

    sids_old = [old[o].get("Sid") for o in left_old]
    for n in list(left_new):
        sid = new[n].get("Sid")
        if sid and sid in sids_old:
            o = next(o for o in left_old if old[o].get("Sid") == sid)
            take(o, n)
            sids_old = [old[o].get("Sid") for o in left_old]
    for n in list(left_new):
        o = next((o for o in left_old if _canonical(old[o]) == _canonical(new[n])), None)
        if o is not None:
            take(o, n)
    scored = sorted((-_similarity(old[o], new[n]), n, o) for n in left_new for o in left_old
                     if _similarity(old[o], new[n]))
    for _, n, o in scored:
        if n in left_new and o in left_old:
            take(o, n)
    pairs += [(o, None) for o in left_old] + [(None, n) for n in left_new]
    return pairs


def statement_changes(path: str, old: list[dict], new: list[dict]) -> list[tuple[str, Any, Any]]:
    """The changes of one Statement list: an added or removed statement whole (before or after None), a changed one
    field by field under its name (module docstring)."""
    out: list[tuple[int, str, Any, Any]] = []
    for o, n in pair_statements(old, new):
        a, b = (old[o] if o is not None else None), (new[n] if n is not None else None)
        sid = (b or a or {}).get("Sid") if (a is None or b is None or a.get("Sid") == b.get("Sid")) else None
        if sid:
            label = f"Sid={sid}"
        elif n is None:
            label = f"was {o}"
        else:
            label = str(n) if o is None or o == n else f"{n}, was {o}"
        order = n if n is not None else len(new) + (o or 0)
        if a is None or b is None:
            out.append((order, f"{path}[{label}]", a, b))
            continue
        fa, fb = _flatten(a), _flatten(b)
        for key in sorted(set(fa) | set(fb)):
            before, after = fa.get(key), fb.get(key)
            if key in _SET_KEYS and _canonical({key: before}) == _canonical({key: after}):
                continue  # the same set in another order
            if before != after:
                out.append((order, f"{path}[{label}].{key}", before, after))
    return [(p, a, b) for _, p, a, b in sorted(out, key=lambda x: x[0])]


def _is_statement_path(path: str) -> bool:
    return ".Statement[" in path or path.startswith("Statement[")


def _readable(resource: dict) -> dict:
    """A streaming job's `--sources` (one JSON string, glue_jobs/glue_entry.py) as {source name: {key: value}}, so
    a change shows as the key of the source it changes (`...--sources.orders.topic`), not as the whole string."""
    arguments = resource.get("Properties", {}).get("DefaultArguments", {})
    if resource.get("Type") != "AWS::Glue::Job" or "--sources" not in arguments:
        return resource
    from devtools.template_sources import job_sources

    try:
        sources = {str(source.get("source_name", i)): source for i, source in enumerate(job_sources(arguments))}
    except ValueError:
        return resource  # not JSON (a template this project did not write): compared as it is
    return {**resource, "Properties": {**resource["Properties"],
                                       "DefaultArguments": {**arguments, "--sources": sources}}}


def resource_property_changes(old: dict, new: dict) -> list[tuple[str, Any, Any]]:
    """(path, before, after) of every changed setting of one resource: flattened paths, policy statements matched."""
    old, new = _readable(old), _readable(new)
    old_rest, old_statements = _split_statements(old)
    new_rest, new_statements = _split_statements(new)
    a, b = _flatten(old_rest), _flatten(new_rest)
    props = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    for path in sorted(set(old_statements) | set(new_statements)):
        props += statement_changes(path, old_statements.get(path, []), new_statements.get(path, []))
    return sorted(props, key=lambda p: _LABEL.sub("", p[0]).split(".")[:2])


def _get(resource: dict, steps: tuple[str, ...]) -> Any:
    value: Any = resource.get("Properties", {})
    for step in steps:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _columns(resource: dict) -> dict[str, str]:
    columns = _get(resource, ("TableInput", "StorageDescriptor", "Columns")) or []
    return {c.get("Name"): c.get("Type") for c in columns if isinstance(c, dict)}


def column_changes(old: dict, new: dict) -> list[str]:
    """A Glue table's columns compared by name (not by list position)."""
    a, b = _columns(old), _columns(new)
    lines = [f"column `{n}` added ({b[n]})" for n in b if n not in a]
    lines += [f"column `{n}` removed (was {a[n]})" for n in a if n not in b]
    lines += [f"column `{n}` type {a[n]} → {b[n]}" for n in b if n in a and a[n] != b[n]]
    if not lines and list(a) != list(b):
        lines.append(f"columns reordered: {', '.join(b)}")
    return lines


def diff_templates(old: dict, new: dict, prices: dict | None = None) -> list[ResourceChange]:
    """The changed resources; `prices` (default config/prices.json) prices their changed settings."""
    prices = sizing.load_prices() if prices is None else prices
    old_r, new_r = old.get("Resources", {}), new.get("Resources", {})
    changes = []
    for lid in sorted(set(new_r) - set(old_r)):
        changes.append(ResourceChange(lid, new_r[lid]["Type"], "added", price=price_resource(new_r[lid]["Type"], new_r[lid], prices)))
    for lid in sorted(set(old_r) - set(new_r)):
        changes.append(ResourceChange(lid, old_r[lid]["Type"], "removed",
                                      price=price_resource(old_r[lid]["Type"], old_r[lid], prices, sign=-1)))
    for lid in sorted(set(old_r) & set(new_r)):
        props = resource_property_changes(old_r[lid], new_r[lid])
        if not props:
            continue
        rtype = new_r[lid]["Type"]
        change = ResourceChange(lid, rtype, "modified", props)
        _price_change(change, old_r[lid], new_r[lid], prices)
        if rtype == "AWS::Glue::Table":
            change.columns = column_changes(old_r[lid], new_r[lid])
            if change.columns:
                change.changes = [p for p in props if ".StorageDescriptor.Columns[" not in p[0]]
        reached = {cfn_schema.replacing_path(rtype, _LABEL.sub("", path)) for path, _, _ in props} - {None}
        change.replacing = sorted(".".join(path) for path in reached)
        if rtype != old_r[lid]["Type"] or reached:
            change.kind = "replaced"
        changes.append(change)
    _cascade_replacements(old_r, new_r, changes)
    refused = refused_checkpoints(old, new)
    for change in changes:
        change.refused_checkpoints = refused.get(change.logical_id, [])
    return changes


def _checkpoint_owners(template: dict) -> dict[str, tuple[str, dict]]:
    """{source: (its streaming job's logical id, the owner its job records in the source's checkpoint)}: a source of
    one dataset {"datasets": [name]}, a routed one {"routed_by": its field, or "schema"} (glue_jobs/batch.py,
    glue_jobs/routed_batch.py; glue_jobs/commit/ownership.py refuses a checkpoint recorded for another owner)."""
    from devtools.template_sources import job_sources

    owners = {}
    for job_id, resource in template.get("Resources", {}).items():
        arguments = resource.get("Properties", {}).get("DefaultArguments", {})
        if resource.get("Type") != "AWS::Glue::Job" or "--sources" not in arguments:
            continue
        try:
            sources = job_sources(arguments)
        except ValueError:
            continue  # a template this project did not write
        for source in sources:
            owner = {"routed_by": source["route_field"]} if "route_field" in source else {"datasets": [source.get("dataset")]}
            owners[str(source.get("source_name"))] = (job_id, owner)
    return owners


def refused_checkpoints(old: dict, new: dict) -> dict[str, list[str]]:
    """{new streaming job's logical id: why it will refuse a source's checkpoint}: a source of both templates (its
    checkpoint is under its name) whose job records another owner there, a topic or stream turned routed or back, or
    a source given another dataset. CloudFormation deploys it; the job then fails at start naming the checkpoint."""
    before, refused = _checkpoint_owners(old), {}
    for source, (job_id, owner) in _checkpoint_owners(new).items():
        if source in before and before[source][1] != owner:
            was = before[source][1]
            refused.setdefault(job_id, []).append(
                f"source {source}: its checkpoint belongs to {_owner_text(was)}, the job now runs it as {_owner_text(owner)}; "
                "the job refuses that checkpoint at start (a checkpoint's offsets are one reading's). Give the source a "
                "new name (a new checkpoint, read from the configured starting position: docs/datasets.md \"Changing a "
                "source's datasets\")")
    return refused


def _owner_text(owner: dict) -> str:
    return f"routed by {owner['routed_by']}" if "routed_by" in owner else f"dataset {owner['datasets'][0]}"


def _price_change(change: ResourceChange, old: dict, new: dict, prices: dict) -> None:
    """Each changed setting's price tag, and the resource's total change when it is not the one setting's alone."""
    if change.type not in PRICED_TYPES or old.get("Type") != new.get("Type"):
        return
    change.prices = {path: tag for path, _, _ in change.changes
                     if (tag := price_setting(change.type, path, old, new, prices)) is not None}
    before, after = resource_price(change.type, old, prices), resource_price(change.type, new, prices)
    priced = [tag for tag in change.prices.values() if tag.startswith("💲")]
    if before.fixed is not None and after.fixed is not None and (len(priced) > 1 or (
            abs(after.fixed - before.fixed) >= 0.005 and not priced)):
        change.price = f"💲 together {_usd(after.fixed - before.fixed)}"


# Types whose name is unique only inside a parent named by a create-only property: when that parent is
# replaced too, the new resource lives in the new parent and its name does not clash.
SCOPED_NAMES = {
    "AWS::Glue::Schema": ("Registry",),
    "AWS::MSK::Topic": ("ClusterArn",),
    "AWS::Glue::Table": ("DatabaseName",),
}


def _keeps_name(rtype: str, old: dict, new: dict, replaced: set[str]) -> str | None:
    """"Name=value" when a replacement of this resource would need the name the old one still holds."""
    parent = SCOPED_NAMES.get(rtype)
    if parent is not None and _references(_get(new, parent)) & replaced:
        return None
    for name in cfn_schema.name_paths(rtype):
        before, after = _get(old, name), _get(new, name)
        if after is not None and before == after:
            return f"{'.'.join(name)}={_show(after)}"
    return None


def _keeps_grantee(rtype: str, old: dict, new: dict, replaced: set[str]) -> bool:
    """Whether a replaced grant names the same principal and resource as before: the replacement then has the old
    grant's identifier. Not so when the principal or resource refers to a resource that is replaced too (a new role
    is a new principal ARN at deploy time although the template text is the same)."""
    identity = GRANT_IDENTITY.get(rtype)
    if identity is None:
        return False
    return all(_get(old, path) == _get(new, path) and not _references(_get(new, path)) & replaced for path in identity)


def _references(value: Any) -> set[str]:
    """Logical ids a template value refers to with Ref or Fn::GetAtt (at any depth)."""
    if isinstance(value, dict):
        if set(value) == {"Ref"} and isinstance(value["Ref"], str):
            return {value["Ref"]}
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            return {target[0] if isinstance(target, list) else str(target).split(".")[0]}
        return set().union(*(_references(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_references(v) for v in value)) if value else set()
    return set()


def _cascade_replacements(old_r: dict, new_r: dict, changes: list[ResourceChange]) -> None:
    """A replaced resource gets a new physical id, so a create-only property that refers to it changes at
    deploy time although the template text does not (a new VPC's subnets replace the MSK cluster whose
    ClientSubnets name them). Such resources are replaced too, to a fixpoint."""
    by_id = {c.logical_id: c for c in changes}
    replaced = {c.logical_id for c in changes if c.kind in ("replaced", "removed")}
    grew = True
    while grew:
        grew = False
        for lid in sorted(set(old_r) & set(new_r)):
            if lid in replaced:
                continue
            rtype = new_r[lid]["Type"]
            reached = [path for path in cfn_schema.replacement_paths(rtype) if _references(_get(new_r[lid], path)) & replaced]
            if not reached:
                continue
            change = by_id.get(lid) or ResourceChange(lid, rtype, "modified")
            if lid not in by_id:
                changes.append(change)
                by_id[lid] = change
            causes = sorted(_references(_get(new_r[lid], reached[0])) & replaced)
            change.kind = "replaced"
            change.replacing = sorted(set(change.replacing) | {".".join(p) for p in reached})
            change.changes.append((".".join(("Properties", *reached[0])), "(refers to replaced)", ", ".join(causes)))
            replaced.add(lid)
            grew = True
    for change in changes:  # names last: whether a name clashes depends on whether its parent is replaced
        if change.kind == "replaced":
            change.fixed_name = _keeps_name(change.type, old_r[change.logical_id], new_r[change.logical_id], replaced)
            change.same_grantee = _keeps_grantee(change.type, old_r[change.logical_id], new_r[change.logical_id], replaced)
    # A grant that moves to a new logical id on the same principal and resource is the same hazard as one replaced in
    # place: CloudFormation creates the new resource under the identifier the old one still holds, then deletes the
    # old one, revoking the pair (GRANT_IDENTITY).
    removed = [c for c in changes if c.kind == "removed" and c.type in GRANT_IDENTITY]
    for change in changes:
        if change.kind == "added" and change.type in GRANT_IDENTITY:
            change.moved_from = next((r.logical_id for r in removed if r.type == change.type and _keeps_grantee(
                change.type, old_r[r.logical_id], new_r[change.logical_id], replaced)), None)
    changes.sort(key=lambda c: (c.kind != "added", c.kind != "removed", c.logical_id))


def _show(value: Any) -> str:
    """A value whole, on one line."""
    if value is None:
        return "(none)"
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def _pretty(value: Any) -> list[str]:
    """A value's indented JSON rendering, line by line (a string holding JSON, a schema definition, parsed first)."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.lstrip().startswith(("{", "[")) else None
        except ValueError:
            parsed = None
        if parsed is None:
            return value.splitlines() or [value]
        value = parsed
    return json.dumps(value, indent=1, sort_keys=True).splitlines()


def _first_difference(before: Any, after: Any) -> int:
    a, b = _show(before), _show(after)
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _list_delta(before: Any, after: Any) -> str | None:
    """"added: …; removed: …" for two lists of strings (or one string and a list: IAM's Action, Resource)."""
    def items(v: Any) -> list | None:
        if isinstance(v, str):
            return [v]
        if isinstance(v, list) and all(not isinstance(x, list) for x in v):
            return v
        return None

    a, b = items(before), items(after)
    if a is None or b is None or not (isinstance(before, list) or isinstance(after, list)):
        return None
    ta, tb = [_show(x) for x in a], [_show(x) for x in b]
    parts = []
    if [x for x in tb if x not in ta]:
        parts.append("added " + ", ".join(f"`{x}`" for x in tb if x not in ta))
    if [x for x in ta if x not in tb]:
        parts.append("removed " + ", ".join(f"`{x}`" for x in ta if x not in tb))
    return "; ".join(parts) or "reordered"


def _value_lines(path: str, before: Any, after: Any, price: str | None) -> list[str]:
    """The lines of one changed setting: `path`: before → after, whole; a long one as a unified diff of its indented
    JSON renderings (every line shown), with the first position at which the two differ."""
    tag = f" — {price}" if price else ""
    statement = _is_statement_path(path) and (before is None or after is None)
    what = "**added statement**" if statement and before is None else "**removed statement**" if statement else None
    delta = _list_delta(before, after)
    long = max(len(_show(before)), len(_show(after))) > MAX_VALUE_CHARS or any(
        isinstance(v, str) and len(_pretty(v)) > 1 for v in (before, after))
    if not long:
        if what:
            return [f"  - `{path}`: {what} `{_show(before if after is None else after)}`{tag}"]
        return [f"  - `{path}`: {_show(before)} → {_show(after)}{f' ({delta})' if delta else ''}{tag}"]
    a, b = _pretty(before), _pretty(after)
    if what:
        head = f"  - `{path}`: {what}{tag}"
    else:
        marks = [f"first difference at character {_first_difference(before, after) + 1}"] if before is not None and after is not None else []
        if before is None:
            marks.append("was (none)")
        if after is None:
            marks.append("now (none)")
        if delta:
            marks.insert(0, delta)
        head = f"  - `{path}`: changed ({'; '.join(marks)}){tag}"
    body = list(difflib.unified_diff(a, b, lineterm="", n=max(len(a), len(b))))[2:]  # every line: shown whole
    body = [line for line in body if not line.startswith("@@")]
    return [head, "    ```diff", *(f"    {line}" for line in body), "    ```"]


# ---- Prices of settings. Fixed capacity from config/prices.json (its rates, region and date); the usage rates below
# are not fixed costs, so the report gives them per unit. Source for all: https://aws.amazon.com/kinesis/data-streams/pricing/
# (us-east-1). The stored copy of that page (read through the search tool, 2026-11) names the charges (on-demand:
# "Extended data retention (beyond the first 24 hours and within the first seven days), Long-Term data retention
# (beyond seven days and up to one year)", billed per GB) but its price tables did not render, so the figures here are
# UNVERIFIED; config/prices.json's kinesis.on_demand_extended_retention_gb_month and long_term_retention_gb_month
# override them when present.
KINESIS_ON_DEMAND_EXTENDED_RETENTION_GB_MONTH = 0.10  # unverified: on-demand Standard, 24 h to 7 days, per GB-month
KINESIS_LONG_TERM_RETENTION_GB_MONTH = 0.023  # unverified: both modes, beyond 7 days, per GB-month
PRICED_TYPES = ("AWS::Kinesis::Stream", "AWS::MSK::Cluster", "AWS::Glue::Job", "AWS::EC2::NatGateway", "AWS::EC2::VPCEndpoint")


@dataclass(frozen=True)
class Price:
    """A resource's monthly fixed USD (None: not priced) and what it is billed by usage, per unit."""

    fixed: float | None
    usage: tuple[str, ...] = ()


def _kinesis_rates(prices: dict) -> tuple[float, float]:
    k = prices["kinesis"]
    return (k.get("on_demand_extended_retention_gb_month", KINESIS_ON_DEMAND_EXTENDED_RETENTION_GB_MONTH),
            k.get("long_term_retention_gb_month", KINESIS_LONG_TERM_RETENTION_GB_MONTH))


def resource_price(rtype: str, resource: dict | None, prices: dict) -> Price:
    """What one template resource costs a month from its own properties (fixed capacity), and its usage rates."""
    if resource is None:
        return Price(0.0)
    props, hours = resource.get("Properties", {}), prices["hours_per_month"]
    if rtype == "AWS::Kinesis::Stream":
        k, metric = prices["kinesis"], prices["cloudwatch"]["metric_month"]
        extended, long_term = _kinesis_rates(prices)
        retention = props.get("RetentionPeriodHours", 24)
        metrics = len(props.get("DesiredShardLevelMetrics") or [])
        on_demand = (props.get("StreamModeDetails") or {}).get("StreamMode") == "ON_DEMAND"
        usage = []
        if on_demand:
            usage += [f"data in {k['on_demand_gb_in']} and out {k['on_demand_gb_out']} USD per GB"]
            if isinstance(retention, int) and retention > 24:
                usage.append(f"retention beyond 24 h (to 7 days) {extended} USD per GB-month stored")
            if metrics:
                usage.append(f"{metrics} shard-level metric(s) at {metric} USD a month per shard Kinesis chooses")
            fixed: float | None = hours * k["on_demand_stream_hour"]
        else:
            shards = props.get("ShardCount")
            if not isinstance(shards, int) or not isinstance(retention, int):
                return Price(None)
            fixed = shards * hours * k["provisioned_shard_hour"] + shards * metrics * metric
            if retention > 24:
                fixed += shards * hours * k["extended_retention_shard_hour"]
        if isinstance(retention, int) and retention > 168:
            usage.append(f"retention beyond 7 days {long_term} USD per GB-month stored")
        return Price(round(fixed, 2), tuple(usage))
    if rtype == "AWS::MSK::Cluster":
        m = prices["msk"]
        info = props.get("BrokerNodeGroupInfo", {})
        broker = m["broker_hour"].get(info.get("InstanceType"))
        brokers = props.get("NumberOfBrokerNodes")
        volume = ((info.get("StorageInfo") or {}).get("EBSStorageInfo") or {}).get("VolumeSize", 0)
        if broker is None or not isinstance(brokers, int):
            return Price(None)
        return Price(round(brokers * hours * broker + brokers * volume * m["storage_gb_month"], 2))
    if rtype == "AWS::Glue::Job":
        g = prices["glue"]
        dpu = g["dpu_per_worker"].get(props.get("WorkerType"))
        workers = props.get("NumberOfWorkers")
        capacity = dpu * workers if dpu is not None and isinstance(workers, int) else props.get("MaxCapacity")
        rate = g["flex_dpu_hour"] if props.get("ExecutionClass") == "FLEX" else g["dpu_hour"]
        if not isinstance(capacity, (int, float)):
            return Price(None)
        if (props.get("Command") or {}).get("Name") == "gluestreaming":  # runs around the clock, at most this many workers
            return Price(round(capacity * hours * rate, 2))
        return Price(None, (f"{capacity:g} DPU x {rate} USD per DPU-hour = {capacity * rate:,.2f} USD per hour it runs",))
    if rtype == "AWS::EC2::NatGateway":
        return Price(round(hours * prices["network"]["nat_gateway_hour"], 2), ("data processed per GB",))
    if rtype == "AWS::EC2::VPCEndpoint":
        if props.get("VpcEndpointType") != "Interface":
            return Price(0.0)
        azs = len(props.get("SubnetIds") or [])
        return Price(round(azs * hours * prices["network"]["interface_endpoint_hour_per_az"], 2), ("data processed per GB",))
    return Price(None)


def _usd(delta: float) -> str:
    sign = "+" if delta > 0.004 else ("-" if delta < -0.004 else "±")
    return f"{sign}{abs(delta):,.2f} USD a month"


def _set_path(resource: dict, path: str, value: Any) -> dict:
    """A copy of the resource with the flattened path `path` (no list steps) set to value (None: removed)."""
    import copy

    out = copy.deepcopy(resource)
    steps = path.split(".")
    node = out
    for step in steps[:-1]:
        if not isinstance(node.get(step), dict):
            node[step] = {}
        node = node[step]
    if value is None:
        node.pop(steps[-1], None)
    else:
        node[steps[-1]] = value
    return out


def price_resource(rtype: str, resource: dict, prices: dict, sign: int = 1) -> str | None:
    """The price tag of an added (sign 1) or removed (-1) resource; None for a type without priced settings."""
    if rtype not in PRICED_TYPES:
        return None
    price = resource_price(rtype, resource, prices)
    if price.fixed is None and not price.usage:
        return "not priced"
    parts = [_usd(sign * price.fixed)] if price.fixed is not None else []
    parts += [f"billed by usage: {u}" for u in price.usage]
    return "💲 " + "; ".join(parts)


def price_setting(rtype: str, path: str, old: dict, new: dict, prices: dict) -> str | None:
    """The price tag of one changed setting: its monthly change alone (old settings but this one), the rate per unit
    where it is billed by usage, or "not priced"; None for a type without priced settings."""
    if rtype not in PRICED_TYPES:
        return None
    if _LABEL.search(path):
        return "not priced"  # inside a list (subnets, tags): priced on the resource heading if at all
    before, after = resource_price(rtype, old, prices), resource_price(rtype, _set_path(old, path, _get_path(new, path)), prices)
    usage = [u for u in after.usage if u not in before.usage]
    gone = [u for u in before.usage if u not in after.usage]
    parts = []
    if before.fixed is not None and after.fixed is not None and abs(after.fixed - before.fixed) >= 0.005:
        parts.append(_usd(after.fixed - before.fixed))
    parts += [f"billed by usage: {u}" for u in usage] + [f"no longer billed: {u}" for u in gone]
    if not parts:
        if rtype == "AWS::Kinesis::Stream" and path == "Properties.RetentionPeriodHours":
            mode = ((new.get("Properties", {}).get("StreamModeDetails") or {}).get("StreamMode"))
            extended, _ = _kinesis_rates(prices)
            if mode == "ON_DEMAND":
                return (f"💲 billed by usage: retention beyond 24 h (to 7 days) {extended} USD per GB-month stored "
                        "(unchanged rate; the GB stored grows with the hours)")
            return ("💲 ±0.00 USD a month: extended retention is billed per shard-hour, whatever the hours "
                    "between 24 and 7 days")
        return "not priced"
    return "💲 " + "; ".join(parts)


def _get_path(resource: dict, path: str) -> Any:
    value: Any = resource
    for step in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _change_lines(change: ResourceChange) -> list[str]:
    head = f"- **{change.kind}** `{change.logical_id}` ({change.type})"
    if change.kind == "modified":
        head += ": in place"
    elif change.kind == "replaced":
        head += f": replacement (create-only {', '.join(f'`{p}`' for p in change.replacing) or '`Type`'})"
    if change.fixed_name is not None and change.deploy_fails:
        head += f" — ⛔ **deploy will fail**: the new resource needs the name it keeps ({change.fixed_name})"
    if change.grant_replaced and change.same_grantee:
        head += (" — ⛔ **deploy will fail: grant replaced on the same principal and resource**: the new grant has the "
                 "old one's identifier (principal + resource), so CloudFormation's create is expected to report "
                 "AlreadyExists; were it to succeed, deleting the old grant would revoke the permissions both hold. "
                 "Deploy it in two steps (docs/lake-formation.md \"Changing a grant\")")
    elif change.moved_from is not None:
        head += (f" — ⛔ **deploy will fail: grant moved from `{change.moved_from}` on the same principal and resource**: "
                 "the new grant has the old one's identifier, and deleting the old one would revoke the permissions "
                 "both hold. Deploy it in two steps (docs/lake-formation.md \"Changing a grant\")")
    elif change.grant_replaced:
        head += (" — 🔑 **grant replaced**: CloudFormation makes the new grant, then deletes the old one, which revokes "
                 "the old principal's permissions on the old resource")
    if change.data_loss:
        head += (" — ⚠ **data loss**: what it holds goes with the old resource (refused unless `make diff "
                 "ALLOW_DATA_LOSS=1`; docs/monitoring.md \"Replacing the MSK cluster\" for the migration that loses nothing)")
    for why in change.refused_checkpoints:
        head += f" — ⛔ **the job will refuse a checkpoint**: {why}"
    if change.price:
        head += f" — {change.price}"
    lines = [head]
    lines += [f"  - {line}" for line in change.columns]
    for path, before, after in change.changes:
        lines += _value_lines(path, before, after, change.prices.get(path))
    return lines


@dataclass(frozen=True)
class CostRange:
    """Fixed monthly USD of one environment: streaming jobs at their minimum and at their maximum workers. `iceberg`: the
    part of both that its Iceberg datasets add (sizing.iceberg_dataset_cost: commits and maintenance, estimates)."""

    low: float
    high: float
    iceberg: float = 0.0

    def __str__(self) -> str:
        return f"{self.low:,.2f}" if abs(self.high - self.low) < 0.005 else f"{self.low:,.2f}–{self.high:,.2f}"


def network_cost(template: dict, prices: dict) -> float:
    """Monthly USD of the template's NAT gateways and interface endpoints (one ENI-hour per subnet)."""
    n, hours = prices["network"], prices["hours_per_month"]
    resources = template.get("Resources", {}).values()
    nat = sum(r["Type"] == "AWS::EC2::NatGateway" for r in resources)
    endpoint_azs = sum(len(r.get("Properties", {}).get("SubnetIds", [])) for r in resources
                       if r["Type"] == "AWS::EC2::VPCEndpoint" and r.get("Properties", {}).get("VpcEndpointType") == "Interface")
    return nat * hours * n["nat_gateway_hour"] + endpoint_azs * hours * n["interface_endpoint_hour_per_az"]


def environment_cost_range(config: ProjectConfig | None, env: str, template: dict, prices: dict,
                           iceberg_datasets: Collection[str] = ()) -> CostRange | None:
    """Capacity from the config (sizing.environment_cost, with what its Iceberg datasets add), network from the
    template."""
    if config is None or env not in config.environments:
        return None
    settings = config.get(env)
    network = network_cost(template, prices)
    low_items = sizing.environment_cost(settings, prices, streaming_workers="min", iceberg_datasets=iceberg_datasets)
    high_items = sizing.environment_cost(settings, prices, streaming_workers="max", iceberg_datasets=iceberg_datasets)
    iceberg = sum(v for k, v in high_items.items() if k.startswith(sizing.ICEBERG_COST_PREFIXES))
    return CostRange(round(sum(low_items.values()) + network, 2), round(sum(high_items.values()) + network, 2),
                     round(iceberg, 2))


def cost_delta(old_config: ProjectConfig | None, new_config: ProjectConfig, env: str, old_template: dict,
               new_template: dict, prices: dict, *, old_iceberg: Collection[str] = (),
               new_iceberg: Collection[str] = ()) -> tuple[CostRange | None, CostRange]:
    """The environment's cost at the base and now; `old_iceberg` / `new_iceberg`: the datasets that are Iceberg
    tables at the base and now (a dataset switches format in its dataset.json, not in the config)."""
    new = environment_cost_range(new_config, env, new_template, prices, new_iceberg)
    assert new is not None  # env comes from the new config
    return environment_cost_range(old_config, env, old_template, prices, old_iceberg), new


def iceberg_datasets() -> frozenset[str]:
    """The datasets whose dataset.json (working tree) says `"table_format": "iceberg"`."""
    from glue_jobs import datasets

    return frozenset(name for name in datasets.names() if datasets.load(name).table_format == "iceberg")


def iceberg_datasets_at(ref: str) -> frozenset[str]:
    """The same at a git ref, from the committed dataset.json files (the base of the diff has no working tree to load
    them from; only the one key is read)."""
    listing = subprocess.run(["git", "ls-tree", "--name-only", f"{ref}:datasets"], cwd=REPO_ROOT,
                             capture_output=True, text=True).stdout.split()
    found = set()
    for name in listing:
        text = _git_show(ref, f"datasets/{name}/dataset.json")
        try:
            if text and json.loads(text).get("table_format") == "iceberg":
                found.add(name)
        except (ValueError, AttributeError):
            continue  # the base's own file was broken: priced as Parquet
    return frozenset(found)


DEPLOY_TYPE = "Custom::StreamingJobDeploy"  # infra/job_keeper.DEPLOY_RESOURCE_TYPE
# Properties of the deploy resource that do not reach the job: the function that answers and how long CloudFormation
# waits for it.
DEPLOY_PLUMBING = ("ServiceToken", "ServiceTimeout")


def _property(path: str) -> str | None:
    """The top-level property a changed path is in ("Properties.Timeout" -> "Timeout"); None outside Properties
    (DependsOn, DeletionPolicy: they do not reach the job)."""
    parts = path.split(".")
    return parts[1].split("[")[0] if parts[0] == "Properties" and len(parts) > 1 else None


def streaming_restarts(old: dict, new: dict, changes: list[ResourceChange]) -> dict[str, list[str]]:
    """{streaming job's source name: why it restarts} for the deploy from `old` to `new` (normalized templates): the
    job keeper restarts a running job when its deploy resource changes (infra/job_keeper.py). That resource's
    CodeDigest is an asset-like hash the snapshots hide, so the reasons are read where they show: a change to a job
    property its runs fix at start (all but infra/job_keeper.NOT_RUN_FIXED), a change to the deploy resource itself
    (a new digest formula, RunsWith), or the replacement of what RunsWith refers to (role, security configuration,
    connections). A changed job script or package zip restarts every streaming job too; asset hashes are not in
    the snapshots, so that is said once per report, not here."""
    from infra.job_keeper import NOT_RUN_FIXED

    old_r, new_r = old.get("Resources", {}), new.get("Resources", {})
    by_id = {c.logical_id: c for c in changes}
    replaced = {c.logical_id for c in changes if c.kind == "replaced"}
    found: dict[str, list[str]] = {}
    for deploy_id, deploy in new_r.items():
        if deploy["Type"] != DEPLOY_TYPE or deploy_id not in old_r:
            continue  # a new deploy resource is a first start, not a restart
        job_id = _references(deploy["Properties"].get("JobName"))
        job_id = next(iter(job_id)) if len(job_id) == 1 else None
        if job_id not in new_r or job_id not in old_r:
            continue
        source = _job_source_names(new_r[job_id]["Properties"].get("DefaultArguments", {})) or job_id
        reasons = [f"`{path}`" for path, _, _ in (by_id[job_id].changes if job_id in by_id else [])
                   if _property(path) is not None and _property(path) not in NOT_RUN_FIXED]
        reasons += [f"deploy `{path}`" for path, _, _ in (by_id[deploy_id].changes if deploy_id in by_id else [])
                    if _property(path) is not None and _property(path) not in DEPLOY_PLUMBING]
        reasons += [f"`{ref}` replaced" for ref in sorted(_references(deploy["Properties"].get("RunsWith")) & replaced)]
        if reasons:
            found[source] = reasons
    return found


@dataclass(frozen=True)
class SourceMove:
    """A source that a deploy moves from one streaming job to another (a regrouping, `streaming_jobs`)."""

    source: str
    old_job: str  # logical id
    new_job: str
    old_job_stoppable: bool  # the old job's tags meet a condition of the new keeper's stop statements


def _source_jobs(template: dict) -> dict[str, tuple[str, dict]]:
    """{source: (logical id of the streaming job that runs it, that job's properties)}."""
    found = {}
    for job_id, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource.get("Type") == "AWS::Glue::Job" and properties.get("Command", {}).get("Name") == "gluestreaming":
            for name in filter(None, _job_source_names(properties.get("DefaultArguments", {})).split(", ")):
                found[name] = (job_id, properties)
    return found


def stop_conditions(template: dict) -> list[dict[str, object]]:
    """The tags a job must carry for the keeper to stop its runs: one {tag: value} per stop statement of the keeper's
    role (infra/job_keeper.py), each met when the job carries all of its tags."""
    found = []
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") != "AWS::IAM::Policy":
            continue
        for statement in resource.get("Properties", {}).get("PolicyDocument", {}).get("Statement", []):
            if statement.get("Sid") in STOP_STATEMENTS:
                equals = statement.get("Condition", {}).get("StringEquals", {})
                found.append({key.removeprefix("aws:ResourceTag/"): value for key, value in equals.items()})
    return found


def source_moves(old: dict, new: dict) -> list[SourceMove]:
    """Each source whose streaming job is another resource after the deploy than before. CloudFormation creates
    (and the keeper starts) the new job before it deletes the old one; the keeper stops the old job's run first
    (infra/functions/job_keeper/handler.py release_checkpoints), allowed on jobs whose tags meet one of its stop
    statements (the checkpoint-bucket tag, or all of the environment's tags)."""
    before, after, conditions = _source_jobs(old), _source_jobs(new), stop_conditions(new)

    def stoppable(properties: dict) -> bool:
        tags = properties.get("Tags") or {}
        return any(condition and all(tags.get(key) == value for key, value in condition.items()) for condition in conditions)

    return [SourceMove(source, before[source][0], job_id, stoppable(before[source][1]))
            for source, (job_id, _) in sorted(after.items()) if source in before and before[source][0] != job_id]


def _job_source_names(arguments: dict) -> str:
    """The sources a streaming job runs, as a restart touches them all: `--sources` (one job, one or several sources),
    or `--source_name` in a template from before jobs held several (the base of a diff may be one)."""
    if "--sources" in arguments:
        from devtools.template_sources import job_sources

        return ", ".join(str(source["source_name"]) for source in job_sources(arguments))
    return arguments.get("--source_name", "")


def render_environment(env: str, changes: list[ResourceChange], old: CostRange | None, new: CostRange,
                       restarts: dict[str, list[str]] | None = None, moves: list[SourceMove] | None = None) -> str:
    old_high = old.high if old else 0.0
    delta = new.high - old_high
    sign = "+" if delta > 0 else ("-" if delta < 0 else "±")
    lines = [f"## {env}", ""]
    if not changes and abs(delta) < 0.005 and (old is None or abs(new.low - old.low) < 0.005):
        return "\n".join(lines + ["No infrastructure changes.", ""])
    counts = {k: sum(c.kind == k for c in changes) for k in ("added", "removed", "replaced", "modified")}
    lines.append(", ".join(f"{n} {k}" for k, n in counts.items()) + "; " +
                 f"fixed monthly cost at maximum workers {old_high:,.2f} → {new.high:,.2f} USD (**{sign}{abs(delta):,.2f}**)")
    lines.append("")
    lines += [f"Auto scaling moves the streaming jobs between their minimum and maximum workers: "
              f"{old or '0.00'} → {new} USD a month; the maximum is what the bill can reach.", ""]
    old_iceberg = old.iceberg if old else 0.0
    if abs(old_iceberg) >= 0.005 or abs(new.iceberg) >= 0.005:
        lines += [f"Of which Iceberg datasets (commits at one per window, maintenance; estimates, `streamlake sizing "
                  f"--iceberg --environment {env}`): {old_iceberg:,.2f} → {new.iceberg:,.2f} USD a month.", ""]
    failing = [c for c in changes if c.deploy_fails]
    if failing:
        lines += [f"**⛔ {len(failing)} change(s) would fail to deploy**: "
                  + ", ".join(f"`{c.logical_id}`" for c in failing) + " (see below).", ""]
    if restarts:
        sources = sum(len(names.split(", ")) for names in restarts)
        lines += [f"**↻ restarts {len(restarts)} streaming job(s), carrying {sources} source(s)** (the job keeper stops "
                  "the running run and starts the job on the new settings; every source of a job resumes from its own "
                  "checkpoint; each line names the sources one job runs):", ""]
        lines += [f"- {source}: {', '.join(reasons)}" for source, reasons in sorted(restarts.items())] + [""]
    if moves:
        lines += [f"**⇄ moves {len(moves)} source(s) to another streaming job** (a regrouping: the new job is created and "
                  "started before the old one is deleted; the job keeper stops the old job's run first, so no two runs "
                  "write one checkpoint, and the source resumes from its checkpoint in the new job; the old job's log groups go "
                  "with it):", ""]
        lines += [f"- {m.source}: `{m.old_job}` → `{m.new_job}`" + ("" if m.old_job_stoppable else
                  " — ⛔ the old job carries neither the tag `streamlake:checkpoint-bucket` nor all of the environment's "
                  "tags, so the keeper may not stop its run: deploy once without the regrouping (it adds the tag), then "
                  "regroup") for m in moves]
        lines.append("")
    security = [c for c in changes if c.security]
    if security:
        lines += ["### ⚠ IAM, security group and policy changes (review first)", ""]
        for c in security:
            lines += _change_lines(c)
        lines.append("")
    rest = [c for c in changes if not c.security]
    for kind in ("replaced", "removed", "added", "modified"):
        group = [c for c in rest if c.kind == kind]
        if group:
            lines += [f"### {kind.capitalize()}", ""]
            for c in group:
                lines += _change_lines(c)
            lines.append("")
    return "\n".join(lines)


def schema_check() -> tuple[str, list[str]]:
    """The committed event schema versions, each checked as the registry would be asked to accept it: against
    the latest version before it and against the checkpoint version (operations/avro_compat.evolution_problems).
    A project without datasets/clickstream has no event schema: every dataset's are dataset_check's."""
    from glue_jobs import datasets, schema
    from operations import avro_compat

    if schema.DATASET not in datasets.names():
        return f"Event schema: none (no datasets/{schema.DATASET})", []
    versions = schema.schema_versions()
    parsed = [avro_compat.parse(schema.schema_text(n), where=schema.schema_file(n)) for n in versions]
    problems = []
    for index in range(1, len(parsed)):
        problems += [f"v{versions[index]}: {p}" for p in avro_compat.evolution_problems("BACKWARD", parsed[index], parsed[:index])]
    line = (f"Event schema: versions {', '.join(f'v{n}' for n in versions)} committed; "
            + ("each BACKWARD-compatible with the latest version before it and v1 (the checkpoint)" if not problems
               else f"⛔ {len(problems)} compatibility problem(s): the deploy would fail"))
    return line, problems


def dataset_check() -> tuple[str, list[str]]:
    """Every dataset's committed versions: each against the one before it by the lake's evolution rules
    (glue_jobs/dataset_evolution.py) and as the registry would check it (BACKWARD, latest and checkpoint)."""
    from glue_jobs import datasets
    from glue_jobs.dataset_evolution import dataset_problems
    from operations import avro_compat

    problems, summary = [], []
    for name, dataset in datasets.load_all().items():
        problems += dataset_problems(dataset)
        parsed = [avro_compat.parse(dataset.schema_text(v), where=f"{name}/schema.v{v}.avsc") for v in dataset.versions]
        for index in range(1, len(parsed)):
            problems += [f"{name} v{dataset.versions[index]}: {p}"
                         for p in avro_compat.evolution_problems("BACKWARD", parsed[index], parsed[:index])]
        summary.append(f"{name} v{dataset.latest_version} (contract {dataset.digest})")
    line = (f"Datasets: {', '.join(summary)}; "
            + ("every version keeps what the lake and the registry can read" if not problems
               else f"⛔ {len(problems)} evolution problem(s): refused"))
    return line, problems


def _git_show(ref: str, path: str) -> str | None:
    proc = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=REPO_ROOT, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def base_state(ref: str) -> tuple[dict[str, dict], ProjectConfig | None]:
    """Snapshots and config committed at ref."""
    snapshot_dir = str(snapshot_path("x").parent.relative_to(REPO_ROOT))
    listing = subprocess.run(["git", "ls-tree", "--name-only", f"{ref}:{snapshot_dir}"], cwd=REPO_ROOT,
                             capture_output=True, text=True).stdout.split()
    templates = {}
    for name in listing:
        if name.endswith(".template.json"):
            templates[name.removesuffix(".template.json")] = json.loads(_git_show(ref, f"{snapshot_dir}/{name}") or "{}")
    raw = _git_show(ref, "config/environments.json")
    try:
        config = parse_config(json.loads(raw)) if raw else None
    except ConfigError:
        config = None  # the base's own config was invalid; cost delta then starts from zero
    return templates, config


def render_report(base_templates: dict[str, dict], new_templates: dict[str, dict],
                  base_config: ProjectConfig | None, new_config: ProjectConfig, ref: str, *,
                  base_iceberg: Collection[str] | None = None, new_iceberg: Collection[str] | None = None) -> str:
    """`base_iceberg` / `new_iceberg`: the Iceberg datasets at the base and now (default: the working tree's, for both)."""
    prices = sizing.load_prices()
    new_iceberg = iceberg_datasets() if new_iceberg is None else new_iceberg
    base_iceberg = new_iceberg if base_iceberg is None else base_iceberg
    parts = [f"# Infrastructure diff against `{ref}`", ""]
    for env in new_templates:
        old_template, new_template = normalize(base_templates.get(env, {})), normalize(new_templates[env])
        changes = diff_templates(old_template, new_template)
        old_cost, new_cost = cost_delta(base_config, new_config, env, base_templates.get(env, {}),
                                        new_templates[env], prices, old_iceberg=base_iceberg, new_iceberg=new_iceberg)
        parts.append(render_environment(env, changes, old_cost, new_cost,
                                        streaming_restarts(old_template, new_template, changes),
                                        source_moves(old_template, new_template)))
    for env in sorted(set(base_templates) - set(new_templates)):
        parts.append(f"## {env}\n\nEnvironment removed from the config: `cdk destroy '{env}/*'` to delete it.\n")
    line, problems = schema_check()
    parts += [line, ""] + [f"- {p}" for p in problems] + ([""] if problems else [])
    line, problems = dataset_check()
    parts += [line, ""] + [f"- {p}" for p in problems] + ([""] if problems else [])
    parts.append("_Restarts: a change to the streaming job's script or package zip (asset hashes, not in the snapshots) "
                 "restarts every streaming job of an environment as well._")
    parts.append("")
    parts.append(f"_Costs: fixed capacity from config/prices.json ({prices['region']}, {prices['as_of']}); streaming "
                 f"jobs from {sizing.MIN_STREAMING_WORKERS} workers (unverified floor) to `max_workers`; Iceberg "
                 f"datasets' commit and maintenance requests at one commit per window (estimates, devtools/sizing.py); "
                 f"other usage (PUT units, GB, requests) not included in the totals; a changed setting billed by usage gives "
                 f"its rate per unit (💲), one not priced says so; IAM statements and settings of other resource types "
                 f"carry no price of their own._")
    return "\n".join(parts) + "\n"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """`prog`: the program name in usage and errors (`streamlake diff` when run through the streamlake command)."""
    from streamlake.options import Parser, exit_codes

    parser = Parser(prog=prog or "python -m devtools.diff", description=__doc__.splitlines()[0],
                    epilog=exit_codes("3 a change that cannot deploy (a replacement that would keep its name)",
                                      "4 (diff) a change that replaces or removes a resource holding data, without "
                                      "--allow-data-loss", "130 interrupted"))
    parser.add_argument("--base", default="HEAD", help="git ref whose committed snapshots and config are the base")
    parser.add_argument("--out", help="also write the Markdown to this file")
    parser.add_argument("--allow-data-loss", action="store_true",
                        help="accept changes that replace or remove a resource holding data (exit 0 instead of 4)")
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = build_parser(prog).parse_args(argv)
    if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}"], cwd=REPO_ROOT,
                      capture_output=True).returncode != 0:
        print(f"error: --base {args.base!r} is not a git commit in {REPO_ROOT}", file=sys.stderr)
        return 2
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from devtools.snapshot import synth_templates

    print(f"{prog or 'diff'}: synthesizing every environment of the working tree and reading the base's templates at "
          f"{args.base}...", file=sys.stderr, flush=True)
    new_templates = synth_templates()
    base_templates, base_config = base_state(args.base)
    report = render_report(base_templates, new_templates, base_config, config, args.base,
                           base_iceberg=iceberg_datasets_at(args.base), new_iceberg=iceberg_datasets())
    print(report)
    if args.out:
        from pathlib import Path

        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no cdk.out/ yet
        out.write_text(report, encoding="utf-8")
    changes = [(env, c) for env, template in new_templates.items()
               for c in diff_templates(normalize(base_templates.get(env, {})), normalize(template))]
    failing = [c.logical_id for _, c in changes if c.deploy_fails]
    failing += [f"{env}: {m.source} moved from untagged {m.old_job}" for env, template in new_templates.items()
                for m in source_moves(normalize(base_templates.get(env, {})), normalize(template)) if not m.old_job_stoppable]
    failing += [f"schema {p}" for p in schema_check()[1] + dataset_check()[1]]
    if failing:
        print(f"error: {len(failing)} change(s) would fail to deploy: {', '.join(failing)}", file=sys.stderr)
        return 3
    losing = [f"{env}: {c.logical_id} ({c.type}, {c.kind})" for env, c in changes if c.data_loss]
    if losing and not args.allow_data_loss:
        print(f"error: {len(losing)} change(s) lose the data a resource holds: {', '.join(losing)}; refused unless "
              "--allow-data-loss (make diff ALLOW_DATA_LOSS=1)", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
