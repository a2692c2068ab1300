"""(c) for bench_streaming.py: the streaming job as deployed (dev's job running clickstream: its script and zip assets
and DefaultArguments from the cloud assembly), run through AWS's `forEachBatch` by the deploy rehearsal
(rehearsal/), fed one held file per micro-batch while the benchmark's own process waits.

A pass's time is the batch processing time AWS's forEachBatch measures itself (from before its
`take(1)` to after the batch function, reported through StreamingSource.updateBatchProcessingTimeInMs):
what Glue reports per batch. It leaves out the trigger wait (windowSize is 1 s here) and Spark's own
offset and commit logs; the wall time from the file's arrival to that report is kept beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from rehearsal import assembly as assembly_module
from rehearsal.moto import moto_server
from rehearsal.run import LocalS3, StartedJob, start_job
from rehearsal.runtime import spark_line
from rehearsal.scenario import HeldInput, source_table

BATCH_EVENT = "batch_processing_time"


def held_tables(assembly, held: Path, idle: Path):
    """The job of the clickstream source (the benchmark's records are clickstream's) and the stand-in's source tables:
    clickstream's reads `held`; the job's other Kinesis sources, if it has any, read empty folders under `idle`."""
    job, source = next((j, s) for j in assembly.glue_jobs() for s in j.sources
                       if s.arguments["--source_type"] == "kinesis" and s.arguments.get("--dataset") == "clickstream")
    tables = source_table(assembly, source, HeldInput(held, 0, [], [], 0))
    for other in job.sources:
        # by name: `sources` makes new JobSource objects on each read (an identity test pointed the fed source's
        # table at an empty folder too, and the job never saw a batch)
        if other.name != source.name and other.arguments["--source_type"] == "kinesis":
            (idle / other.name).mkdir(parents=True)
            tables |= source_table(assembly, other, HeldInput(idle / other.name, 0, [], [], 0))
    return job, tables


class GlueJobBench:
    def __init__(self, cdk_out: Path, work: Path, *, environment: str = "dev", driver_memory: str = "2g") -> None:
        assembly = assembly_module.load(cdk_out, environment)
        shutil.rmtree(work, ignore_errors=True)
        self.held = work / "held"
        self.held.mkdir(parents=True)
        self.work = work
        self.job, tables = held_tables(assembly, self.held, work / "idle")
        # The Spark line the benchmark itself runs on, so (a) and (c) compare the same Spark.
        self.line = spark_line(os.environ.get("BENCH_SPARK_PYTHON", sys.executable))
        # CloudWatch on a moto server: without an endpoint the job's metrics client would spend each batch
        # failing to reach AWS inside the measured batch function.
        self._resources = contextlib.ExitStack()
        endpoint = self._resources.enter_context(moto_server())
        self.started: StartedJob = start_job(
            self.job, line=self.line, workdir=work, s3=LocalS3(work / "s3"), tables=tables,
            run_arguments={"--window_size_seconds": "1"}, driver_memory=driver_memory, moto_endpoint=endpoint,
        )
        self.fed = 0

    def batch(self, source_file: Path, timeout: float = 900) -> dict:
        """Hand `source_file` to the job as the next micro-batch; return its times once processed."""
        done_before = len(self._batches())
        name = f"batch-{self.fed:05d}.json"
        hidden = self.held / f".{name}"  # Spark's file source skips names starting with "." until the rename
        os.link(source_file, hidden)
        arrived = time.perf_counter()
        hidden.rename(self.held / name)
        self.fed += 1
        while len(self._batches()) <= done_before:
            if self.started.process.poll() is not None:
                raise RuntimeError(f"the Glue job ended (exit {self.started.process.returncode}); log {self.started.log_err}")
            if time.perf_counter() - arrived > timeout:
                raise RuntimeError(f"no batch reported {timeout:.0f} s after {name}; log {self.started.log_err}")
            time.sleep(0.05)
        wall = time.perf_counter() - arrived
        return {"seconds": self._batches()[done_before]["millis"] / 1000, "wall_seconds": round(wall, 3)}

    def _batches(self) -> list[dict]:
        return [e for e in self.started.report() if e.get("event") == BATCH_EVENT]

    def close(self) -> dict:
        run = self.started.finish(stop_signal=signal.SIGTERM)
        self._resources.close()
        return {"pyspark": self.line.pyspark_version, "job": self.job.logical_id, "glue_version": self.job.glue_version,
                "batches": len([e for e in run.report if e.get("event") == BATCH_EVENT])}


def first_lines(source: Path, count: int, target: Path) -> Path:
    """A file of the first `count` lines of `source`."""
    with open(source, encoding="utf-8") as read, open(target, "w", encoding="utf-8") as write:
        for number, line in enumerate(read):
            if number == count:
                break
            write.write(line)
    return target


def hours_touched(source: Path) -> int:
    """How many hour partitions the records of `source` fall into: epoch-millisecond event times inside the
    contract's range (from 2000-01-01 to a day from now; the generator's out_of_range records are outside it)."""
    import json

    earliest, latest = 946_684_800_000, int(time.time() * 1000) + 86_400_000
    hours = set()
    with open(source, encoding="utf-8") as read:
        for line in read:
            try:
                event_time = json.loads(line)["event_time"]
            except (ValueError, TypeError, KeyError):
                continue
            if isinstance(event_time, int) and earliest <= event_time <= latest:
                hours.add(event_time // 3_600_000)
    return len(hours)


def concatenated(files: list[Path], target: Path) -> Path:
    with open(target, "wb") as out:
        for path in files:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, out)
    return target
