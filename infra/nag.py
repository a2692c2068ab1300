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
