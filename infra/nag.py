"""One way to acknowledge a cdk-nag finding: on the construct, with the rule id and a specific reason.

docs/infrastructure.md "cdk-nag acknowledgements" lists every call and why.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    if len(reason) < 40:
        raise ValueError(f"acknowledgement of {rule_id} needs a specific reason, got {reason!r}")
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def finding_text(scope: IConstruct, value: str) -> str:
    """How cdk-nag prints a (possibly tokenized) IAM resource in a finding id.

    Refs become <Name>, GetAtts <Name.Attr>, any other intrinsic its compact JSON, joined in order.
    """
    import json

    resolved = cdk.Stack.of(scope).resolve(value)

    def render(part) -> str:
        if isinstance(part, str):
            return part
        if isinstance(part, dict) and set(part) == {"Ref"}:
            return f"<{part['Ref']}>"
        if isinstance(part, dict) and set(part) == {"Fn::GetAtt"}:
            return f"<{'.'.join(part['Fn::GetAtt'])}>"
        if isinstance(part, dict) and set(part) == {"Fn::Join"}:
            separator, items = part["Fn::Join"]
            return separator.join(render(item) for item in items)
        return json.dumps(part, separators=(",", ":"))

    return render(resolved)


def acknowledge_wildcard_resource(construct: IConstruct, resource: str, reason: str) -> None:
    """Acknowledge AwsSolutions-IAM5 for exactly one wildcard resource on this construct."""
    acknowledge(construct, f"AwsSolutions-IAM5[Resource::{finding_text(construct, resource)}]", reason)
