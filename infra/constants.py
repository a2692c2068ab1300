"""Names shared by the infrastructure and the tools that find what it deployed."""

WORKLOAD = "streamlake"
STACK_ID = "StreamingLake"
# The stack name of an environment is f"{project}-{environment}"; tools read outputs from it.


def stack_name(project: str, environment: str) -> str:
    return f"{project}-{environment}"


def pascal(name: str) -> str:
    """'click-stream' -> 'ClickStream': the suffix of per-source construct ids and output keys."""
    return "".join(part.capitalize() for part in name.replace("_", "-").split("-"))
