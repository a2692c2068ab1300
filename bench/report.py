"""The verdict of `make bench`: every benchmark's rows in one table, with the machine, date and commit.

    python bench/report.py bench-output/streaming.json bench-output/compaction.json ... \\
        [--out-dir bench-output] [--markdown docs/benchmarks.md] [--lengths bench-output/lengths.jsonl]

Writes bench-output/bench.json (what `python -m devtools.sizing` reads for the measured records/s per
core), bench-output/bench.png, and the Markdown table docs/benchmarks.md: each row's value,
target and whether it is met. Exits 1 when a row misses its target, naming each such row; a result file
that is missing (its benchmark failed) fails it too. With `--lengths` (bench/timed.py's log) it adds the row of
`make bench`'s own length and each benchmark's seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.rows import at_most, local_fs, met, use_local_fs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# `make bench` in at most 25 minutes on the 2-core machine the target was set on, so that three runs fit a sitting
# (issue 58). A time in seconds, so it depends on the machine as the 4,000-record row's does.
LENGTH_TARGET_SECONDS = 1500


def length_row(lengths: Path) -> tuple[dict | None, list[dict]]:
    """The row of `make bench`'s length, from bench/timed.py's log (None when the log is absent or empty), and the
    log's entries (each script's whole process, one after another)."""
    if not lengths.exists():
        return None, []
    entries = [json.loads(line) for line in lengths.read_text().splitlines() if line.strip()]
    if not entries:
        return None, []
    total = round(sum(entry["seconds"] for entry in entries))
    return at_most(f"make bench's {len(entries)} benchmarks one after another, whole processes (target: 25 minutes on the "
                   "2-core machine it was set on), seconds", total, LENGTH_TARGET_SECONDS, "s"), entries


def machine() -> dict:
    """What the figures were measured on."""
    model = memory = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
        kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:"))
        memory = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {"cores": os.cpu_count(), "cpu": model or platform.processor(), "memory": memory,
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "java": java[0] if java else "not found"}


def commit(own: Path | None = None) -> str:
    """The commit measured, marked when the work tree differs from it; `own`, the table this report writes, does not
    count (a run right after another finds the first run's table not yet committed)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=False).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    left_out = [f":(exclude){own.resolve().relative_to(ROOT).as_posix()}"] if own and own.resolve().is_relative_to(ROOT) else []
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", *left_out)
    return head + (" + uncommitted changes" if changed else "")


def summary(results: dict[str, dict]) -> dict:
    """The figures devtools.sizing and the chart read (streaming's, when it ran)."""
    streaming = results.get("streaming") or {}
    glue_job = streaming.get("glue_job") or {}
    return {
        "glue_job_records_per_second_per_core": glue_job.get("records_per_second_per_core"),
        "bare_records_per_second_per_core": streaming.get("bare_records_per_second_per_core"),
        "runner_records_per_second_per_core": streaming.get("runner_records_per_second_per_core"),
    }


def _figure(value: float, unit: str) -> str:
    return f"{value:g} {unit}".strip()


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (bench/report.py); do not edit by hand. A figure here describes the commit",
        "named below: after a change on a measured path, run `make bench` again and commit this file with it.",
        "What each row measures and how: docs/development.md \"Benchmarks and sizing\"; where the time goes: docs/performance.md.",
        "",
        f"- measured: {report['date']}",
        f"- commit: {report['commit']}",
        f"- machine: {m['cores']} cores ({m['cpu']}), {m['memory']}, {m['os']}",
        f"- Python {m['python']}, {m['java']}, Spark {report.get('spark') or 'n/a'}",
        f"- local file system: {report.get('local_fs') or 'n/a'}",
        "",
        "| row | measured | target | met |",
        "|---|---|---|---|",
    ]
    for row in report["rows"]:
        verdict = met(row)
        target = f"{row['op']} {_figure(row['target'], row['unit'])}" if row["target"] is not None else "—"
        lines.append(f"| {row['row']} | **{_figure(row['value'], row['unit'])}** | {target} | "
                     f"{'—' if verdict is None else 'yes' if verdict else '**NO**'} |")
    if report.get("lengths"):
        lines += ["", "Each benchmark's whole process, seconds: " + ", ".join(
            f"{entry['script']} {entry['seconds']:g}" + ("" if entry["exit"] == 0 else f" (exit {entry['exit']})")
            for entry in report["lengths"]) + "."]
    missing = report["missing"]
    if missing:
        lines += ["", f"Results missing (the benchmark failed before writing them): {', '.join(missing)}."]
    failing = [row["row"] for row in report["rows"] if met(row) is False]
    lines += ["", f"Verdict: {'every target met' if not failing and not missing else 'targets NOT met'}."]
    return "\n".join(lines) + "\n"


def chart(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, c = results.get("streaming") or {}, results.get("compaction") or {}
    if "bare_records_per_second_per_core" not in s or "bare_median_seconds" not in c:
        return  # the chart shows the streaming and compaction benchmarks; without both there is nothing to draw
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    labels = ["(a) bare Spark\nread-parse-write", "(b) local runner"]
    rates = [s["bare_records_per_second_per_core"], s["runner_records_per_second_per_core"]]
    if s.get("glue_job"):
        labels.append("(c) deployed job\nvia forEachBatch")
        rates.append(s["glue_job"]["records_per_second_per_core"])
    bars = left.bar(labels, rates, color=["#9aa5b1", "#2f6f9f", "#6f4f9f"][:len(rates)])
    left.bar_label(bars, fmt="{:,.0f}")
    left.set_title(f"{s['records']:,} records: records/s per core\n(b)/(a) = {s['ratio_runner_to_bare']} (target ≥ {s['target_ratio']})")
    bars = right.bar(["bare read+write", "compaction"], [c["bare_median_seconds"], c["compaction_median_seconds"]],
                     color=["#9aa5b1", "#2f8f5f"])
    right.bar_label(bars, fmt="{:.1f} s")
    right.set_title(f"{c['files']:,} small files: median seconds\ncompaction/bare = {c['ratio']} (target ≤ {c['target_ratio']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="the benchmarks' JSON results (each with its 'rows')")
    parser.add_argument("--out-dir", type=Path, default=Path("bench-output"))
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here (make bench: docs/benchmarks.md)")
    parser.add_argument("--lengths", type=Path, default=None,
                        help="bench/timed.py's log of each benchmark's whole process: adds the row of make bench's length")
    args = parser.parse_args(argv)

    results, rows, missing, spark = {}, [], [], None
    for path in args.results:
        if not path.exists():
            missing.append(str(path))
            continue
        result = json.loads(path.read_text())
        results[path.stem] = result
        rows += result.get("rows", [])
        spark = spark or result.get("spark")
    lengths: list[dict] = []
    if args.lengths is not None:
        row, lengths = length_row(args.lengths)
        if row is None:
            missing.append(str(args.lengths))
        else:
            rows.append(row)
    report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit(args.markdown), "machine": machine(), "local_fs": local_fs(),
              "spark": spark, "rows": rows, "missing": missing, "summary": summary(results), "lengths": lengths,
              **results}  # each benchmark's whole result under its file's name: "streaming" is what sizing reads
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (args.out_dir / "bench.md").write_text(table)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
    chart(results, args.out_dir / "bench.png")
    print(table)
    failing = [row for row in rows if met(row) is False]
    for row in failing:
        print(f"NOT met: {row['row']}: {_figure(row['value'], row['unit'])}, target {row['op']} "
              f"{_figure(row['target'], row['unit'])}", file=sys.stderr)
    for path in missing:
        print(f"missing: {path} (its benchmark did not finish)", file=sys.stderr)
    print(f"wrote {args.out_dir / 'bench.json'}" + (f" and {args.markdown}" if args.markdown else ""))
    return 1 if failing or missing else 0


if __name__ == "__main__":
    sys.exit(main())
