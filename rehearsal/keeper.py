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


def _deployed_handler(assembly: Assembly):
    """The keeper's handler module, loaded from the assembly's code folder, and the function's environment variables."""
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
    return getattr(module, function_name), variables


def _credentials(moto_endpoint: str) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": "rehearsal", "AWS_SECRET_ACCESS_KEY": "rehearsal", "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION, "AWS_ENDPOINT_URL": moto_endpoint}


def _create_streaming_jobs(assembly: Assembly, glue, *, skip: set[str] = frozenset()) -> None:
    """The streaming jobs in moto's Glue under the names the template gives them, with their DefaultArguments (the
    keeper reads a job's checkpoints from them before it starts it); those named in `skip` exist already."""
    for logical_id, job in assembly.resources("AWS::Glue::Job").items():
        name = assembly.ref(logical_id)
        if job["Properties"]["Command"]["Name"] == "gluestreaming" and name not in skip:
            properties = assembly.resolve(job["Properties"])
            glue.create_job(Name=name, Role=properties["Role"], DefaultArguments=properties.get("DefaultArguments", {}),
                            Command={"Name": "gluestreaming", "ScriptLocation": properties["Command"]["ScriptLocation"]})


def rehearse_keeper(assembly: Assembly, moto_endpoint: str) -> dict[str, str]:
    """Run one scheduled check of the deployed keeper; returns {job name: state} as the handler reports it."""
    import boto3

    handler, variables = _deployed_handler(assembly)
    credentials = _credentials(moto_endpoint)
    glue = boto3.client("glue", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="rehearsal",
                        aws_secret_access_key="rehearsal")
    _create_streaming_jobs(assembly, glue)
    with _environment({**credentials, **{k: str(v) for k, v in variables.items()}}):
        return handler(SCHEDULED_EVENT, None)


def deploy_resources(assembly: Assembly) -> dict[str, dict]:
    """{job name: its Custom::StreamingJobDeploy properties as CloudFormation resolves them} (ServiceToken left out)."""
    found = {}
    for resource in assembly.resources("Custom::StreamingJobDeploy").values():
        properties = {k: v for k, v in resource["Properties"].items() if k != "ServiceToken"}
        resolved = assembly.resolve(properties)
        found[resolved["JobName"]] = resolved
    return found


def rehearse_keeper_deploy(before: Assembly, after: Assembly, moto_endpoint: str) -> dict[str, dict]:
    """A deploy from `before` to `after` as CloudFormation makes it reach the deployed keeper (of `after`): the streaming
    jobs exist and run (started from `before`), the jobs `after` adds are created, then each deploy resource whose
    resolved properties changed gets an Update with its old and new properties, and each new one a Create, as
    CloudFormation sends them (custom resource request objects); the answer is PUT to a ResponseURL served on
    loopback. Returns {job name: {"reason", "status", "runs"}} with the job's runs (Id -> state) after the request;
    the jobs `after` drops stay, as they do until CloudFormation's cleanup."""
    import boto3

    from rehearsal.moto import fill_glue_gaps

    fill_glue_gaps()  # the moto server runs in this process: BatchStopJobRun and runs that stay up
    handler, variables = _deployed_handler(after)
    glue = boto3.client("glue", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="rehearsal",
                        aws_secret_access_key="rehearsal")
    _create_streaming_jobs(before, glue)
    for name in deploy_resources(before):
        glue.start_job_run(JobName=name)
    old, new = deploy_resources(before), deploy_resources(after)
    # CloudFormation creates the jobs `after` adds (and deletes the ones it drops only at the end, in cleanup).
    _create_streaming_jobs(after, glue, skip=set(old))
    results = {}
    with _response_server() as (url, answers), _environment({**_credentials(moto_endpoint),
                                                              **{k: str(v) for k, v in variables.items()}}):
        for name, properties in sorted(new.items()):
            if old.get(name) == properties:
                continue
            event = {"RequestType": "Update" if name in old else "Create", "ResponseURL": f"{url}/{name}", "StackId": "rehearsal-stack",
                     "RequestId": f"update-{name}", "LogicalResourceId": f"Deploy-{name}",
                     "PhysicalResourceId": f"deploy-{name}", "ResourceType": "Custom::StreamingJobDeploy",
                     "ResourceProperties": properties, **({"OldResourceProperties": old[name]} if name in old else {})}
            reason = handler(event, None)["deploy"]
            runs = {r["Id"]: r["JobRunState"] for r in glue.get_job_runs(JobName=name)["JobRuns"]}
            results[name] = {"reason": reason, "status": answers.get(f"/{name}", {}).get("Status"), "runs": runs}
    return results


@contextmanager
def _response_server():
    """A loopback HTTP server that takes the function's PUT of its custom resource response: (url, {path: body})."""
    import http.server
    import json
    import threading

    answers: dict[str, dict] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802 (http.server's name)
            answers[self.path] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        server.server_close()
