"""Names of retained resources: unique per stack instance, so a deleted environment can be created again.

A resource kept on stack delete (`removal_policy: retain`, prod) keeps its name in the account. If the
stack gave it a fixed name, creating the environment again fails on that name ("already exists"), so
every retained resource that needs a name (Kinesis stream, MSK cluster, its configuration and broker
log group, Schema Registry) ends in a suffix taken from the stack's own id: `AWS::StackId` is
`arn:<partition>:cloudformation:<region>:<account>:stack/<stack name>/<uuid>` and a new stack gets a new
uuid (CloudFormation pseudo parameters reference), so the suffix is the uuid's first 8 hex digits. It is
the same for every update of that stack, so updates keep the names; only a new stack gets new ones, next to
the retained resources of the old one. Resources that hold no data (catalog database and tables, Glue
security configuration) are not retained at all, and keep their readable fixed names. Environments that
destroy on delete keep fixed names everywhere.
"""

from __future__ import annotations

import aws_cdk as cdk


def stack_instance_suffix() -> str:
    """First 8 hex digits of the stack's uuid (a token resolved by CloudFormation)."""
    uuid = cdk.Fn.select(2, cdk.Fn.split("/", cdk.Aws.STACK_ID))
    return cdk.Fn.select(0, cdk.Fn.split("-", uuid))


def retained_name(base: str, removal_policy: cdk.RemovalPolicy) -> str:
    """`base` for a resource destroyed with its stack; `base-<stack instance suffix>` for a retained one."""
    if removal_policy != cdk.RemovalPolicy.RETAIN:
        return base
    return cdk.Fn.join("-", [base, stack_instance_suffix()])
