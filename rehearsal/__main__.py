"""streamlake rehearse --environment dev [--cdk-out cdk.out] [--records 600] [--kill-after-batches N]

Synthesizes nothing: reads the assembly `make synth` wrote. Each job runs on the Spark line of its Glue
version: Glue 4.0 on .venv-spark33's Python (pyspark 3.3), 5.0 and 5.1 on .venv's (pyspark 3.5). Glue 6.0
cannot be rehearsed here: AWS's awsglue package for it needs Python 3.13 (infra/runtimes.py).
Exit status 0 when every check holds; each problem is printed otherwise. `python -m rehearsal` is the same.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from infra.runtimes import RUNTIMES
from rehearsal import assembly as assembly_module
from rehearsal.assembly import RehearsalError
from streamlake.options import Parser, add_renamed, exit_codes

REPO = Path(__file__).resolve().parents[1]
# Spark line -> the virtualenv Python with that line's pyspark and AWS's awsglue (Makefile: .venv, .venv-spark33).
_LINE_PYTHONS = {"3.3": REPO / ".venv-spark33" / "bin" / "python", "3.5": REPO / ".venv" / "bin" / "python"}
# Glue version -> that Python, for every version the rehearsal can run (infra/runtimes.py `rehearsable`).
SPARK_LINE_PYTHONS = {v: _LINE_PYTHONS[r.spark] for v, r in RUNTIMES.items() if r.rehearsable}


def spark_lines(pythons=None) -> dict:
    from rehearsal.runtime import spark_line

    return {version: spark_line(python) for version, python in (pythons or SPARK_LINE_PYTHONS).items()}


EPILOG = exit_codes(ok="0 rehearsed clean: every check holds",
                    failed="1 a check failed or a job failed to run (each problem is printed)",
                    usage="2 usage error, or no assembly to rehearse (run `make synth`) or no Spark line's Python "
                          "(run `make bootstrap`)")


def build_parser(prog: str = "python -m rehearsal") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description=__doc__.splitlines()[0], epilog=EPILOG)
    add_renamed(parser, "--environment", "--env", required=True, help="environment to rehearse (a stage in the assembly)")
    parser.add_argument("--cdk-out", default=str(REPO / "cdk.out"), help="synthesized cloud assembly (make synth)")
    parser.add_argument("--records", type=int, default=600, help="held records per streaming source (default 600)")
    parser.add_argument("--kill-after-batches", type=int, default=None,
                        help="SIGKILL each streaming job once this many batches are committed, then rerun it")
    parser.add_argument("--workdir", default=None, help="keep the run here (default: a temporary folder)")
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog or "python -m rehearsal")
    args = parser.parse_args(argv)
    if args.records < 3:
        parser.error("--records must be at least 3")
    from glue_jobs.local_runner import local_spark_session
    from rehearsal.checks import problems
    from rehearsal.moto import moto_server
    from rehearsal.run import LocalS3
    from rehearsal.scenario import rehearse_environment

    try:
        assembly = assembly_module.load(Path(args.cdk_out), args.environment)
        lines = spark_lines()
    except (RehearsalError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with moto_server() as endpoint, tempfile.TemporaryDirectory(prefix=f"rehearsal-{args.environment}-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            result = rehearse_environment(assembly, lines=lines, workdir=workdir, moto_endpoint=endpoint,
                                          records=args.records, kill_after_batches=args.kill_after_batches)
        except RehearsalError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for name, source in result.sources.items():
            c = source.committed
            print(f"{args.environment} {name}: records={c['records_in']} written={c['records_written']} "
                  f"dead_letters={c['dead_letters']} duplicates={c['duplicates_collapsed']} batches={c['batches']} "
                  f"runs={len(source.runs)} ({', '.join(f'{r.seconds:.0f} s' for r in source.runs)}) "
                  f"on pyspark {lines[source.runs[-1].job.glue_version].pyspark_version}")
        if result.compaction:
            print(f"{args.environment} compaction: exit {result.compaction.returncode} in {result.compaction.seconds:.0f} s "
                  f"on pyspark {lines[result.compaction.job.glue_version].pyspark_version}")
        print(f"{args.environment} job keeper (deployed code, one scheduled check on moto): "
              + ", ".join(f"{job} {state}" for job, state in sorted(result.keeper.items())))
        found = problems(result, local_spark_session("rehearsal-checks"), LocalS3(workdir / "s3"))
    for problem in found:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{args.environment}: {'rehearsed clean' if not found else f'{len(found)} problem(s)'}; "
          f"alarmed StreamLake metrics published: {len(result.alarm_metrics & result.metrics)}/{len(result.alarm_metrics)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
