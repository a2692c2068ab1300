"""Combine the streaming and compaction benchmark results into one JSON and one PNG chart.

    python bench/report.py --streaming S.json --compaction C.json --out-dir bench-output

bench-output/bench.json is what `python -m infra_tools.sizing` reads for the measured records/s per core.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def combine(streaming: dict, compaction: dict) -> dict:
    glue_job = streaming.get("glue_job") or {}
    return {
        "streaming": streaming,
        "compaction": compaction,
        "summary": {
            "glue_job_records_per_second_per_core": glue_job.get("records_per_second_per_core"),
            "ratio_glue_job_to_bare": glue_job.get("ratio_glue_job_to_bare"),
            "glue_job_meets_target": (glue_job["ratio_glue_job_to_bare"] >= streaming["target_ratio"]) if glue_job else None,
            "glue_job_median_seconds_per_batch": {size: b["median_seconds"] for size, b in glue_job.get("per_batch", {}).items()},
            "bare_records_per_second_per_core": streaming["bare_records_per_second_per_core"],
            "runner_records_per_second_per_core": streaming["runner_records_per_second_per_core"],
            "ratio_runner_to_bare": streaming["ratio_runner_to_bare"],
            "runner_meets_target": streaming["ratio_runner_to_bare"] >= streaming["target_ratio"],
            "compaction_to_bare_time_ratio": compaction["ratio"],
            "compaction_meets_target": compaction["ratio"] <= compaction["target_ratio"],
        },
    }


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, c = result["streaming"], result["compaction"]
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streaming", type=Path, required=True)
    parser.add_argument("--compaction", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, default=Path("bench-output"))
    args = parser.parse_args(argv)
    for path in (args.streaming, args.compaction):
        if not path.exists():
            parser.error(f"{path} does not exist: run the benchmark first")
    result = combine(json.loads(args.streaming.read_text()), json.loads(args.compaction.read_text()))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    chart(result, args.out_dir / "bench.png")
    summary = result["summary"]
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out_dir / 'bench.json'} and {args.out_dir / 'bench.png'}")
    glue_ok = summary["glue_job_meets_target"] is not False
    return 0 if summary["runner_meets_target"] and summary["compaction_meets_target"] and glue_ok else 1


if __name__ == "__main__":
    sys.exit(main())
