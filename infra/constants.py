"""Names shared by the infrastructure and the tools that find what it deployed."""

WORKLOAD = "streamlake"
STACK_ID = "StreamingLake"
# The Kinesis shard-level metrics every stream enables (infra/streams.py; sizing prices one CloudWatch metric each
# per shard): CDK's aws_kinesis.ShardLevelMetrics member names.
SHARD_LEVEL_METRICS = ("INCOMING_BYTES", "INCOMING_RECORDS", "ITERATOR_AGE_MILLISECONDS", "WRITE_PROVISIONED_THROUGHPUT_EXCEEDED")
# The stack name of an environment is f"{project}-{environment}"; tools read outputs from it.


def stack_name(project: str, environment: str) -> str:
    return f"{project}-{environment}"


def pascal(name: str) -> str:
    """'click-stream' -> 'ClickStream': the suffix of per-source construct ids and output keys."""
    return "".join(part.capitalize() for part in name.replace("_", "-").split("-"))
