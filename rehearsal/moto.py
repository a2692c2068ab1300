"""A moto server on loopback: the CloudWatch (and other AWS APIs) a rehearsed job, a benchmark or a test talks
to through AWS_ENDPOINT_URL instead of AWS; and the moto 5.2.5 gaps the job keeper meets, filled (fill_glue_gaps)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Yields the server's endpoint URL; the server stops when the block ends."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _batch_stop_job_run(self):
    """Glue's BatchStopJobRun, which moto 5.2.5 does not implement: the runs named become STOPPED, with the response
    shape of the Glue API (SuccessfulSubmissions, Errors)."""
    from moto.core.responses import ActionResult

    job_name = self._get_param("JobName")
    job = self.glue_backend.get_job(job_name)
    stopped, errors = [], []
    for run_id in self._get_param("JobRunIds"):
        run = next((r for r in job.job_runs if r.job_run_id == run_id), None)
        if run is None or run.status not in ("STARTING", "RUNNING", "WAITING"):
            errors.append({"JobName": job_name, "JobRunId": run_id, "ErrorDetail": {
                "ErrorCode": "InvalidInputException", "ErrorMessage": f"run {run_id} is not running"}})
        else:
            run.status = "STOPPED"
            stopped.append({"JobName": job_name, "JobRunId": run_id})
    return ActionResult({"SuccessfulSubmissions": stopped, "Errors": errors})


def fill_glue_gaps() -> None:
    """moto 5.2.5 gaps (scaffolding, not behaviour under test): BatchStopJobRun implemented as above, and job runs
    kept where they are (moto advances them STARTING -> RUNNING -> SUCCEEDED on every read; a streaming run stays up)."""
    from moto.glue.responses import GlueResponse
    from moto.moto_api import state_manager

    GlueResponse.batch_stop_job_run = _batch_stop_job_run
    state_manager.set_transition(model_name="glue::job_run", transition={"progression": "manual", "times": 10**9})
