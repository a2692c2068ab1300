"""The job keeper as deployed (infra/job_keeper.py): its function's code folder from the assembly, run with the
function's synthesized environment against the moto server, as the 5-minute schedule invokes it.

The streaming jobs are created in moto's Glue under the names the template gives them (the rehearsal runs the
jobs themselves locally, not through Glue); the keeper then finds them never started, starts each through
StartJobRun and publishes JobNotRunning and RestartsCapped, the metrics its alarms watch. Stood in: only the
Lambda runtime (the handler is called in this process with the function's environment variables).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from contextlib import contextmanager

from rehearsal.assembly import REGION, Assembly, RehearsalError

SCHEDULED_EVENT = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


@contextmanager
def _environment(variables: dict[str, str]):
    saved = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def keeper_function(assembly: Assembly) -> tuple[dict, dict]:
    """(the function's resolved properties, its environment variables)."""
    functions = {k: v for k, v in assembly.resources("AWS::Lambda::Function").items() if k.startswith("JobKeeperFunction")}
    if len(functions) != 1:
        raise RehearsalError(f"{assembly.environment}: {len(functions)} job keeper functions in the template")
    properties = assembly.resolve(next(iter(functions.values()))["Properties"])
    return properties, properties["Environment"]["Variables"]


def rehearse_keeper(assembly: Assembly, moto_endpoint: str) -> dict[str, str]:
    """Run one scheduled check of the deployed keeper; returns {job name: state} as the handler reports it."""
    import boto3

    properties, variables = keeper_function(assembly)
    key = properties["Code"]["S3Key"]
    if key not in assembly.directories:
        raise RehearsalError(f"the keeper's code {key} is not a folder asset of the assembly")
    module_name, function_name = properties["Handler"].rsplit(".", 1)
    path = assembly.directories[key] / f"{module_name}.py"
    spec = importlib.util.spec_from_file_location(f"rehearsal_keeper_{assembly.environment}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    credentials = {"AWS_ACCESS_KEY_ID": "rehearsal", "AWS_SECRET_ACCESS_KEY": "rehearsal", "AWS_DEFAULT_REGION": REGION,
                   "AWS_REGION": REGION, "AWS_ENDPOINT_URL": moto_endpoint}
    glue = boto3.client("glue", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="rehearsal",
                        aws_secret_access_key="rehearsal")
    for logical_id, job in assembly.resources("AWS::Glue::Job").items():
        if job["Properties"]["Command"]["Name"] == "gluestreaming":
            glue.create_job(Name=assembly.ref(logical_id), Role=assembly.resolve(job["Properties"]["Role"]),
                            Command={"Name": "gluestreaming", "ScriptLocation": assembly.resolve(job["Properties"]["Command"]["ScriptLocation"])})
    with _environment({**credentials, **{k: str(v) for k, v in variables.items()}}):
        return getattr(module, function_name)(SCHEDULED_EVENT, None)
