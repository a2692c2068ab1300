"""Offline IAM policy lint of the synthesized templates, with parliament (pinned in requirements-dev.txt).

    python -m devtools.iam_lint            # lint the committed snapshots (tests/snapshots/)
    python -m devtools.iam_lint --synth    # synthesize every environment first (the same templates, ~5 s)

Every policy document in a template is extracted (identity policies of AWS::IAM::Policy, AWS::IAM::ManagedPolicy
and AWS::IAM::Role inline policies; role trust policies; S3 bucket, SNS topic and KMS key policies), its
CloudFormation intrinsics are rendered to concrete placeholder strings (a GetAtt Arn of a bucket becomes an S3
bucket ARN, of a Kinesis stream a Kinesis stream ARN, ...), and parliament checks the result against the IAM
action database it bundles: unknown actions or prefixes, actions whose resource types match none of the
statement's resources (RESOURCE_MISMATCH), condition keys an action does not support, malformed ARNs and
principals, Resource "*" where the action could be scoped, and its community auditors (privilege escalation,
permissions management, credentials exposure). Nothing reaches the network: the action database is a file
inside the parliament package.

Rendering is strict: an intrinsic function, pseudo parameter, resource type or attribute the tables below do not
know raises UnrenderableError naming it, so a new kind of reference grows the table instead of being linted as
something it is not. Every document in a template that has a "Statement" must be one the extractor knows.

Trust policies (AssumeRolePolicyDocument) are linted too. They have no Resource element (the resource is the
role itself), which parliament would report as MALFORMED, so each statement gets the role's own placeholder
ARN as its Resource before the lint; that checks the actions (sts:AssumeRole ...), principals and condition
keys. parliament accepts any Principal "*", so an Allow to every principal in a trust policy is reported here
as TRUST_POLICY_PRINCIPAL_STAR. AWS managed policies attached by ARN (ManagedPolicyArns) are not in the
template and are not linted.

A finding matched by ACKNOWLEDGED (issue code plus a policy name glob or a statement Sid, with the reason) is
reported as acknowledged; every other finding is a failure (tests/infra/test_iam_lint.py, and exit 1 here).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

with warnings.catch_warnings():
    # parliament 1.6.4 loads its data through pkg_resources and leaves the files open.
    warnings.simplefilter("ignore")
    import parliament

# The community auditors' finding types live in a second config file; the parliament CLI merges it the same way.
parliament.override_config(str(Path(parliament.__file__).parent / "community_auditors" / "config_override.yaml"))

PARTITION = "aws"
REGION = "us-east-1"
ACCOUNT = "111122223333"

PSEUDO_PARAMETERS = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "placeholder-stack",
    # Physical names derived from the stack id take Fn::Select over Fn::Split of it, so it has the real shape.
    "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/placeholder-stack/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
}

AVAILABILITY_ZONES = [f"{REGION}a", f"{REGION}b", f"{REGION}c"]

# Resource type -> {"Ref" or GetAtt attribute: placeholder}. "{name}" is the logical id, lowercased, so two
# resources of one type render to two different ARNs (parliament compares resources across statements).
# The shapes are the documented Ref / Fn::GetAtt return values of each type, with the ARN formats of the
# service authorization reference, so parliament matches them against the right resource type.
_R, _A = REGION, ACCOUNT
RESOURCE_PLACEHOLDERS: dict[str, dict[str, str]] = {
    "AWS::S3::Bucket": {"Ref": "{name}", "Arn": "arn:aws:s3:::{name}", "DomainName": "{name}.s3.amazonaws.com"},
    "AWS::KMS::Key": {"Ref": "{name}", "Arn": f"arn:aws:kms:{_R}:{_A}:key/{{name}}", "KeyId": "{name}"},
    "AWS::Kinesis::Stream": {"Ref": "{name}", "Arn": f"arn:aws:kinesis:{_R}:{_A}:stream/{{name}}"},
    "AWS::SNS::Topic": {
        "Ref": f"arn:aws:sns:{_R}:{_A}:{{name}}", "TopicArn": f"arn:aws:sns:{_R}:{_A}:{{name}}", "TopicName": "{name}",
    },
    "AWS::Glue::Registry": {"Ref": f"arn:aws:glue:{_R}:{_A}:registry/{{name}}", "Arn": f"arn:aws:glue:{_R}:{_A}:registry/{{name}}"},
    "AWS::Glue::Schema": {
        "Ref": f"arn:aws:glue:{_R}:{_A}:schema/placeholder-registry/{{name}}",
        "Arn": f"arn:aws:glue:{_R}:{_A}:schema/placeholder-registry/{{name}}",
    },
    "AWS::Glue::Connection": {"Ref": "{name}"},
    "AWS::Glue::Database": {"Ref": "{name}"},
    "AWS::Glue::Table": {"Ref": "{name}"},
    "AWS::Glue::Job": {"Ref": "{name}"},
    "AWS::Glue::SecurityConfiguration": {"Ref": "{name}"},
    # Ref and Arn of an MSK cluster are both the ARN: cluster/<name>/<uuid>-<n> (Fn::Split on "/" needs 3 parts).
    "AWS::MSK::Cluster": {
        "Ref": f"arn:aws:kafka:{_R}:{_A}:cluster/{{name}}/11111111-2222-3333-4444-555555555555-1",
        "Arn": f"arn:aws:kafka:{_R}:{_A}:cluster/{{name}}/11111111-2222-3333-4444-555555555555-1",
    },
    "AWS::Logs::LogGroup": {"Ref": "/placeholder/{name}", "Arn": f"arn:aws:logs:{_R}:{_A}:log-group:/placeholder/{{name}}:*"},
    "AWS::IAM::Role": {"Ref": "{name}", "Arn": f"arn:aws:iam::{_A}:role/{{name}}", "RoleId": "AROAPLACEHOLDER{name}"},
    "AWS::Lambda::Function": {"Ref": "{name}", "Arn": f"arn:aws:lambda:{_R}:{_A}:function:{{name}}"},
    "AWS::Events::Rule": {"Ref": "{name}", "Arn": f"arn:aws:events:{_R}:{_A}:rule/{{name}}"},
    "AWS::CloudWatch::Alarm": {"Ref": "{name}", "Arn": f"arn:aws:cloudwatch:{_R}:{_A}:alarm:{{name}}"},
    "AWS::EC2::VPC": {"Ref": "vpc-{name}", "VpcId": "vpc-{name}", "DefaultSecurityGroup": "sg-default{name}"},
    "AWS::EC2::Subnet": {"Ref": "subnet-{name}", "SubnetId": "subnet-{name}"},
    "AWS::EC2::SecurityGroup": {"Ref": "sg-{name}", "GroupId": "sg-{name}"},
}

# The placeholder a trust policy's statements get as their implicit Resource: the role they belong to.
_ROLE_ARN = RESOURCE_PLACEHOLDERS["AWS::IAM::Role"]["Arn"]


class UnrenderableError(ValueError):
    """A CloudFormation expression in a policy that the placeholder tables cannot render."""


@dataclass(frozen=True)
class PolicyDocument:
    """One policy of a template. kind: identity (IAM policies), resource (bucket/topic/key), trust (role trust)."""

    name: str
    kind: str
    logical_id: str
    resource_type: str
    document: Any


@dataclass(frozen=True)
class Finding:
    """One linter finding. actions: the (lowercased) actions it names, when it names any."""

    issue: str
    severity: str
    policy: str
    sid: str | None
    statement: int | None
    detail: str
    actions: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = self.policy if self.statement is None else f"{self.policy} statement {self.statement}"
        if self.sid:
            where += f" (Sid {self.sid})"
        return f"{self.issue} [{self.severity}] {where}: {self.detail}"


@dataclass(frozen=True)
class Acknowledgement:
    """Acknowledges findings of `issue` in policies whose name matches the glob `policy` or in statements with
    Sid `sid`; if `actions` is given, only findings whose actions are all among them; if `detail` is given (a
    glob), only findings whose detail matches it."""

    issue: str
    reason: str
    policy: str | None = None
    sid: str | None = None
    actions: frozenset[str] | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.sid is None):
            raise ValueError(f"acknowledgement of {self.issue}: give exactly one of policy (a name glob) or sid")
        if self.actions is not None:
            object.__setattr__(self, "actions", frozenset(a.lower() for a in self.actions))

    def matches(self, finding: Finding) -> bool:
        if finding.issue != self.issue:
            return False
        if self.sid is not None and finding.sid != self.sid:
            return False
        if self.policy is not None and not fnmatch.fnmatchcase(finding.policy, self.policy):
            return False
        if self.actions is not None and not (finding.actions and set(finding.actions) <= self.actions):
            return False
        return self.detail is None or fnmatch.fnmatchcase(finding.detail, self.detail)


_KEY_POLICY_ROOT = (
    "The AWS KMS default key policy statement (CDK's default for every kms.Key): kms:* for the account root "
    "principal, Resource *. AWS KMS Developer Guide, Default key policy: it \"allows access to the AWS account "
    "and enables IAM policies\" - without it only the key policy could ever grant use of the key. "
)
_LOGS_KEY_STATEMENT = (
    "The key policy statement the CloudWatch Logs guide prescribes for a log group encrypted with a KMS key "
    "(Encrypt log data in CloudWatch Logs using AWS KMS, step 2): the logs.<region>.amazonaws.com principal gets "
    "kms:Encrypt*, Decrypt*, ReEncrypt*, GenerateDataKey*, Describe* under an Arn condition on "
    "kms:EncryptionContext:aws:logs:arn (glue_security.py for /aws-glue/*, msk.py for the broker log group). "
)

# Every finding the synthesized templates are allowed to have, each with the reason it is not a real problem.
# tests/infra/test_iam_lint.py fails on any other finding and on an acknowledgement no finding uses any more.
ACKNOWLEDGED: list[Acknowledgement] = [
    Acknowledgement(
        "RESOURCE_STAR", policy="*:KeyPolicy",
        reason=(
            'KMS key policies: "In a key policy, the value of the Resource element is "*", which means "this KMS '
            'key."" (AWS KMS Developer Guide, Key policies). A key policy cannot name any other resource, so '
            "Resource * there is already scoped to the one key."
        ),
    ),
    Acknowledgement(
        "PERMISSIONS_MANAGEMENT_ACTIONS", policy="*:KeyPolicy",
        actions={"kms:creategrant", "kms:putkeypolicy", "kms:retiregrant", "kms:revokegrant", "kms:createkey"},
        reason=_KEY_POLICY_ROOT + "The grant and key-policy actions are part of kms:* for the account; who in the "
        "account may use them is decided by IAM policies, none of which in this app grant them (kms:CreateKey is "
        "an account-level action a key policy cannot grant at all).",
    ),
    Acknowledgement(
        "UNKNOWN_CONDITION_FOR_ACTION", policy="*:KeyPolicy",
        actions={"kms:describekey", "kms:describecustomkeystores"}, detail="Unknown condition kms:EncryptionContext:aws:logs:arn *",
        reason=_LOGS_KEY_STATEMENT + "kms:Describe* expands to DescribeKey and DescribeCustomKeyStores, whose "
        "requests carry no encryption context, so under that condition they are never allowed: the documented "
        "statement grants less than it lists, never more.",
    ),
    Acknowledgement(
        "MISMATCHED_TYPE", policy="*:KeyPolicy", detail="Type mismatch: Arn* requires a value of type Arn but given String",
        reason=_LOGS_KEY_STATEMENT + "The service authorization reference types kms:EncryptionContext:${Key} as "
        "String, but the CloudWatch Logs guide compares aws:logs:arn with ArnLike / ArnEquals (its value is the log "
        "group ARN), and Arn operators on a string key compare it as an ARN.",
    ),
    Acknowledgement(
        "CREDENTIALS_EXPOSURE", policy="*:AssumeRolePolicyDocument", actions={"sts:assumerole"},
        reason=(
            "A role trust policy exists to let its principal call sts:AssumeRole and obtain the role's credentials "
            "(IAM User Guide, Role trust policy). Every trust policy in these templates names one AWS service "
            "principal (glue.amazonaws.com or lambda.amazonaws.com); TRUST_POLICY_PRINCIPAL_STAR guards the "
            "dangerous case."
        ),
    ),
    Acknowledgement(
        # DefaultPolicy, or OverflowPolicyN: CDK moves a role's statements into attached overflow (managed) policies
        # once its policy document passes 10 kB (aws/aws-cdk#35611, "Roles generate overflow policies when their policy
        # document exceeds 10k bytes"; dev's shared job with three sources does). The same issue reports statements
        # moving between those policies on a later deploy, briefly absent: an open risk for a running job's role.
        "RESOURCE_MISMATCH", policy="StreamingJob*Role*Policy*",
        actions={"kinesis:describestreamconsumer", "kinesis:subscribetoshard", "kinesis:liststreams"},
        reason=(
            "Added by CDK's kinesis.Stream.grant_read (streaming_job.py) next to the polling actions the job uses "
            "(DescribeStream*, GetShardIterator, GetRecords, ListShards). On the stream ARN they authorize nothing: "
            "the service authorization reference gives SubscribeToShard and DescribeStreamConsumer the consumer "
            "resource type (<stream ARN>/consumer/<name>:<timestamp>) and ListStreams no resource type (Resource * "
            "only). Dead grants, they widen nothing; the job registers no enhanced fan-out consumer."
        ),
    ),
    Acknowledgement(
        "RESOURCE_MISMATCH", policy="MskBootstrapBrokers*", actions={"kafka:getbootstrapbrokers"},
        reason=(
            "parliament's database (from the service authorization reference) lists kafka:GetBootstrapBrokers with "
            "no resource type, so it expects Resource *. MSK authorizes it against the cluster: the MSK Developer "
            "Guide's cluster policy example (Permissions for multi-VPC private connectivity) grants "
            "kafka:GetBootstrapBrokers with Resource set to the cluster ARN, which a resource policy can only do for "
            "an action on that resource. msk.py scopes the custom resource's call to the one cluster on purpose. "
            "If a deploy ever fails with AccessDenied on GetBootstrapBrokers, this is the statement to revisit."
        ),
    ),
]


# --- extraction --------------------------------------------------------------------------------------------


def _label(policy_name: Any, logical_id: str) -> str:
    return policy_name if isinstance(policy_name, str) and policy_name != logical_id else ""


# Resource types whose "Statement" properties are not IAM policies (WAF rule statements).
NOT_POLICY_STATEMENTS = frozenset({"AWS::WAFv2::WebACL", "AWS::WAFv2::RuleGroup"})


def extract_policies(template: dict) -> list[PolicyDocument]:
    """Every policy document of `template`, named "<logical id>[:<policy name or property>]".

    Raises UnrenderableError if a resource holds a policy document (a mapping with "Statement") that this
    function does not extract, so a new kind of resource policy is added here rather than skipped.
    """
    out: list[PolicyDocument] = []
    for logical_id, resource in template.get("Resources", {}).items():
        rtype = resource.get("Type", "")
        props = resource.get("Properties", {}) or {}
        found: list[tuple[str, str, Any, tuple]] = []  # (name, kind, document, property path)
        if rtype in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            label = _label(props.get("PolicyName") or props.get("ManagedPolicyName"), logical_id)
            found.append((f"{logical_id}:{label}" if label else logical_id, "identity", props.get("PolicyDocument"),
                          ("PolicyDocument",)))
        elif rtype == "AWS::IAM::Role":
            if "AssumeRolePolicyDocument" in props:
                found.append((f"{logical_id}:AssumeRolePolicyDocument", "trust", props["AssumeRolePolicyDocument"],
                              ("AssumeRolePolicyDocument",)))
            for index, inline in enumerate(props.get("Policies", []) or []):
                name = inline.get("PolicyName")
                label = name if isinstance(name, str) else f"Policies[{index}]"
                found.append((f"{logical_id}:{label}", "identity", inline.get("PolicyDocument"),
                              ("Policies", index, "PolicyDocument")))
        elif rtype in ("AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy"):
            found.append((logical_id, "resource", props.get("PolicyDocument"), ("PolicyDocument",)))
        elif rtype == "AWS::KMS::Key" and "KeyPolicy" in props:
            found.append((f"{logical_id}:KeyPolicy", "resource", props["KeyPolicy"], ("KeyPolicy",)))
        known = {path for *_, path in found}
        for path in [] if rtype in NOT_POLICY_STATEMENTS else _statement_paths(props):
            if path not in known:
                raise UnrenderableError(
                    f"{logical_id} ({rtype}) has a policy document at Properties.{'.'.join(map(str, path))} "
                    "that devtools/iam_lint.py does not extract; add it to extract_policies"
                )
        out += [PolicyDocument(name, kind, logical_id, rtype, doc) for name, kind, doc, _ in found]
    return out


def _statement_paths(value: Any, path: tuple = ()):
    if isinstance(value, dict):
        if "Statement" in value:
            yield path
            return
        for key, child in value.items():
            yield from _statement_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _statement_paths(child, (*path, index))


# --- rendering ---------------------------------------------------------------------------------------------


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and (next(iter(value)) == "Ref" or next(iter(value)).startswith("Fn::"))


def _resource_value(logical_id: str, attribute: str, resources: dict) -> str:
    """The placeholder for Ref (attribute "Ref") or Fn::GetAtt of a resource of the template."""
    if logical_id not in resources:
        raise UnrenderableError(f"reference to {logical_id!r}, which is neither a resource of the template nor a pseudo parameter")
    rtype = resources[logical_id].get("Type", "")
    table = RESOURCE_PLACEHOLDERS.get(rtype)
    if table is None:
        raise UnrenderableError(f"no placeholder for resource type {rtype} ({logical_id}); add it to RESOURCE_PLACEHOLDERS")
    if attribute not in table:
        what = "Ref" if attribute == "Ref" else f"Fn::GetAtt {attribute}"
        raise UnrenderableError(f"no placeholder for {what} of {rtype} ({logical_id}); add it to RESOURCE_PLACEHOLDERS")
    return table[attribute].format(name=logical_id.lower())


def _ref(name: str, resources: dict) -> str:
    if name in PSEUDO_PARAMETERS:
        return PSEUDO_PARAMETERS[name]
    if name.startswith("AWS::"):
        raise UnrenderableError(f"no placeholder for pseudo parameter {name}")
    return _resource_value(name, "Ref", resources)


def _string(value: Any, resources: dict, what: str) -> str:
    rendered = render(value, resources)
    if not isinstance(rendered, str):
        raise UnrenderableError(f"{what} must render to a string, got {rendered!r}")
    return rendered


def _list(value: Any, resources: dict, what: str) -> list:
    rendered = render(value, resources)
    if not isinstance(rendered, list):
        raise UnrenderableError(f"{what} must render to a list, got {rendered!r}")
    return rendered


_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


def _sub(args: Any, resources: dict) -> str:
    if isinstance(args, str):
        text, variables = args, {}
    elif isinstance(args, list) and len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], dict):
        text, variables = args[0], {k: _string(v, resources, f"Fn::Sub variable {k}") for k, v in args[1].items()}
    else:
        raise UnrenderableError(f"Fn::Sub with unexpected arguments {args!r}")

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name.startswith("!"):
            return "${" + name[1:] + "}"  # ${!Literal} is the literal ${Literal}
        if name in variables:
            return variables[name]
        if "." in name and not name.startswith("AWS::"):
            logical_id, attribute = name.split(".", 1)
            return _resource_value(logical_id, attribute, resources)
        return _ref(name, resources)

    return _SUB_VARIABLE.sub(replace, text)


def render(value: Any, resources: dict) -> Any:
    """`value` with every CloudFormation intrinsic replaced by its placeholder; `resources` is the template's
    Resources (for the type of a Ref or Fn::GetAtt target). Raises UnrenderableError on anything unknown."""
    if isinstance(value, list):
        return [render(item, resources) for item in value]
    if not isinstance(value, dict):
        return value
    if not _is_intrinsic(value):
        return {key: render(child, resources) for key, child in value.items()}
    (function, args), = value.items()
    if function == "Ref":
        if not isinstance(args, str):
            raise UnrenderableError(f"Ref with unexpected argument {args!r}")
        return _ref(args, resources)
    if function == "Fn::GetAtt":
        if isinstance(args, str):
            args = args.split(".", 1)
        if not (isinstance(args, list) and len(args) == 2 and all(isinstance(a, str) for a in args)):
            raise UnrenderableError(f"Fn::GetAtt with unexpected arguments {args!r}")
        return _resource_value(args[0], args[1], resources)
    if function == "Fn::Join":
        if not (isinstance(args, list) and len(args) == 2 and isinstance(args[0], str)):
            raise UnrenderableError(f"Fn::Join with unexpected arguments {args!r}")
        parts = _list(args[1], resources, "Fn::Join list")
        if not all(isinstance(part, str) for part in parts):
            raise UnrenderableError(f"Fn::Join parts must render to strings, got {parts!r}")
        return args[0].join(parts)
    if function == "Fn::Sub":
        return _sub(args, resources)
    if function == "Fn::Select":
        if not (isinstance(args, list) and len(args) == 2):
            raise UnrenderableError(f"Fn::Select with unexpected arguments {args!r}")
        index = int(render(args[0], resources))
        items = _list(args[1], resources, "Fn::Select list")
        if not 0 <= index < len(items):
            raise UnrenderableError(f"Fn::Select index {index} out of range for placeholder list {items!r}")
        return items[index]
    if function == "Fn::Split":
        if not (isinstance(args, list) and len(args) == 2 and isinstance(args[0], str)):
            raise UnrenderableError(f"Fn::Split with unexpected arguments {args!r}")
        return _string(args[1], resources, "Fn::Split source").split(args[0])
    if function == "Fn::GetAZs":
        region = _string(args, resources, "Fn::GetAZs region") if args != "" else REGION
        if region != REGION:
            raise UnrenderableError(f"Fn::GetAZs for region {region!r}; placeholders only know {REGION}")
        return list(AVAILABILITY_ZONES)
    raise UnrenderableError(f"no renderer for intrinsic function {function}; add it to devtools/iam_lint.py render()")


def render_policy(policy: PolicyDocument, template: dict) -> dict:
    """The policy document as parliament reads it: intrinsics rendered; a trust policy's statements get the
    role's own ARN as their (implicit) Resource."""
    resources = template.get("Resources", {})
    try:
        document = render(policy.document, resources)
    except UnrenderableError as exc:
        raise UnrenderableError(f"{policy.name}: {exc}") from None
    if policy.kind == "trust":
        role_arn = _ROLE_ARN.format(name=policy.logical_id.lower())
        statements = document.get("Statement", [])
        statements = statements if isinstance(statements, list) else [statements]
        document = {**document, "Statement": [{**stmt, "Resource": role_arn} for stmt in statements]}
    return document


# --- lint ----------------------------------------------------------------------------------------------------


def _detail(detail: Any) -> str:
    if detail is None or detail == "":
        return ""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list) and all(isinstance(d, dict) and "action" in d for d in detail):
        # RESOURCE_MISMATCH: each action with the resource format it would need
        return "; ".join(f"{d['action']} needs {d.get('required_format', '?')}" for d in detail)
    if isinstance(detail, list) and all(isinstance(d, str) for d in detail):
        return ", ".join(detail)
    return json.dumps(detail, sort_keys=True, default=str)


_FOR_ACTION = re.compile(r"for action (\S+)$")


def _actions(raw: Any) -> tuple[str, ...]:
    """The actions a parliament finding names: RESOURCE_MISMATCH and RESOURCE_STAR list them in the detail, the
    community auditors in location["actions"], UNKNOWN_CONDITION_FOR_ACTION at the end of its detail."""
    found: list[str] = []
    if isinstance(raw.detail, list):
        found = [item["action"] if isinstance(item, dict) else str(item) for item in raw.detail]
    elif isinstance(raw.detail, str) and (match := _FOR_ACTION.search(raw.detail)):
        found = [match.group(1)]
    if isinstance(raw.location, dict) and isinstance(raw.location.get("actions"), list):
        found += raw.location["actions"]
    return tuple(sorted({a.lower() for a in found}))


def _finding(raw: Any, policy: str, sid: str | None, statement: int | None) -> Finding:
    raw = parliament.enhance_finding(raw)
    detail = _detail(raw.detail)
    if not detail and isinstance(raw.location, dict):
        extra = raw.location.get("actions", raw.location.get("string"))
        detail = _detail(extra)
    return Finding(raw.issue, raw.severity, policy, sid, statement, detail or raw.title, _actions(raw))


def lint_document(document: dict, name: str, kind: str = "identity") -> list[Finding]:
    """parliament's findings (with its community auditors) for one rendered policy document."""
    analyzed = parliament.analyze_policy_string(
        json.dumps(document), filepath=name, ignore_private_auditors=True, include_community_auditors=True,
    )
    findings = [_finding(raw, name, None, None) for raw in analyzed._findings]
    for index, statement in enumerate(analyzed.statements):
        findings += [_finding(raw, name, statement.sid, index) for raw in statement.findings]
    if kind == "trust":
        findings += _trust_findings(document, name)
    return findings


def _trust_findings(document: dict, name: str) -> list[Finding]:
    """parliament lets Principal "*" pass; in a trust policy an unconditioned Allow to it lets anyone assume."""
    out = []
    statements = document.get("Statement", [])
    for index, stmt in enumerate(statements if isinstance(statements, list) else [statements]):
        principal = stmt.get("Principal")
        aws = principal.get("AWS") if isinstance(principal, dict) else None
        star = principal == "*" or aws == "*" or (isinstance(aws, list) and "*" in aws)
        if stmt.get("Effect") == "Allow" and star and not stmt.get("Condition"):
            out.append(Finding("TRUST_POLICY_PRINCIPAL_STAR", "HIGH", name, stmt.get("Sid"), index,
                               "Allow to every AWS principal without a Condition: anyone may assume the role"))
    return out


@dataclass
class LintResult:
    policies: list[PolicyDocument] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    acknowledged: list[tuple[Finding, Acknowledgement]] = field(default_factory=list)
    unacknowledged: list[Finding] = field(default_factory=list)


def lint_template(template: dict, acknowledged: list[Acknowledgement] | None = None) -> LintResult:
    """Lint every policy of a synthesized template and split the findings by ACKNOWLEDGED."""
    acks = ACKNOWLEDGED if acknowledged is None else acknowledged
    result = LintResult(policies=extract_policies(template))
    for policy in result.policies:
        result.findings += lint_document(render_policy(policy, template), policy.name, policy.kind)
    for finding in result.findings:
        ack = next((a for a in acks if a.matches(finding)), None)
        if ack is None:
            result.unacknowledged.append(finding)
        else:
            result.acknowledged.append((finding, ack))
    return result


# --- CLI -----------------------------------------------------------------------------------------------------


def _load_templates(synth: bool) -> dict[str, dict]:
    if synth:
        from devtools.snapshot import synth_templates

        return synth_templates()
    from devtools.snapshot import snapshot_path
    from infra.config import load_config

    return {env: json.loads(snapshot_path(env).read_text(encoding="utf-8")) for env in load_config().environments}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.iam_lint", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--synth", action="store_true", help="synthesize the templates instead of reading the snapshots")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list the acknowledged findings")
    args = parser.parse_args(argv)
    failed = False
    for env, template in _load_templates(args.synth).items():
        result = lint_template(template)
        print(f"{env}: {len(result.policies)} policies, {len(result.findings)} findings, "
              f"{len(result.acknowledged)} acknowledged, {len(result.unacknowledged)} unacknowledged")
        if args.verbose:
            for finding, ack in result.acknowledged:
                print(f"  acknowledged {finding}\n    because: {ack.reason}")
        for finding in result.unacknowledged:
            print(f"  UNACKNOWLEDGED {finding}")
        failed = failed or bool(result.unacknowledged)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
