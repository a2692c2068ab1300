"""Run one benchmark script and record how long its whole process took, for `make bench`'s length row.

    python bench/timed.py --log bench-output/lengths.jsonl -- bench/bench_streaming.py --records 1000000 ...

Runs the script with this Python, appends one JSON line {"script", "seconds", "exit"} to `--log` (wall time of the
whole process: imports, sessions, generating inputs, warm-ups and the measured passes), and exits with the script's
exit code. bench/report.py reads the log (`--lengths`) and adds the row "make bench's benchmarks, one after another".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="JSON-lines file the script's length is appended to")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the benchmark script and its arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not command[0].endswith(".py"):
        parser.error("give the benchmark script after --, e.g. -- bench/bench_cold.py --records 1000")
    started = time.perf_counter()
    code = subprocess.run([sys.executable, *command], check=False).returncode
    seconds = time.perf_counter() - started
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("a") as log:
        log.write(json.dumps({"script": Path(command[0]).name, "arguments": command[1:], "seconds": round(seconds, 1),
                              "exit": code}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
