"""Which records the typed contract's fast path (the JVM proof, glue_jobs/contract/strict_json.py) hands to the strict parse,
by the shape of the record: clickstream records from `generate(shape=...)`, each valid line classified by what it
carries (glue_jobs/generate.PRODUCER_SHAPES, read back from the line itself), and for each shape the share the proof
does not answer. The strict parse finds the same verdict either way (tests/spark/test_typed_contract.py); what this
measures is only which records pay for the slower path.

    python -m devtools.fast_path_census [--records 20000] [--shape producers]

Prints one line per shape, then the records not proven that carry no listed shape (a cause this census misses).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path


def shapes_of(line: str) -> list[str]:
    """The PRODUCER_SHAPES a valid clickstream line carries, read from the line (the generator does not label them)."""
    record = json.loads(line)
    found = []
    if "\\" in line:
        found.append("escapes")
    if any(ord(c) > 127 for c in line):
        found.append("non_ascii")
    if record["event_type"] != record["event_type"].strip().lower():
        found.append("case_variant")
    if isinstance(record.get("metadata"), list):
        found.append("json_text_array")
    if isinstance(record.get("amount"), int) and not isinstance(record.get("amount"), bool):
        found.append("integer_amount")
    if any(value is None for value in record.values()):
        found.append("explicit_null")
    if record.get("metadata") is not None:
        found.append("json_text_present")
    return found or ["plain"]


def census(spark, lines: list[str]) -> dict[str, tuple[int, int]]:
    """shape -> (valid lines carrying it, of those not proven by the JVM proof)."""
    from pyspark.sql import functions as F

    from glue_jobs.contract import strict_json
    from glue_jobs.datasets import load

    proof = strict_json.register(spark, load("clickstream"))
    if proof is None:
        raise SystemExit("the JVM functions jar is not on the classpath: run `make bootstrap`")
    # Through a file, not createDataFrame: pyspark 3.3 cannot pickle on Python 3.11 (tests/spark/streaming_support.py).
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "lines.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        frame = spark.read.text(str(Path(work) / "lines.txt")).coalesce(1)  # one file, one partition: the lines' order
        proven = [row[0] for row in frame.select(F.expr(f"{proof}(value)").isNotNull()).collect()]
    totals: Counter = Counter()
    unproven: Counter = Counter()
    for line, ok in zip(lines, proven, strict=True):
        for shape in shapes_of(line):
            totals[shape] += 1
            unproven[shape] += 0 if ok else 1
    return {shape: (totals[shape], unproven[shape]) for shape in totals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.fast_path_census", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="records to generate (default 20000)")
    parser.add_argument("--shape", choices=("generated", "producers"), default="producers", help="generator shape")
    args = parser.parse_args(argv)
    from glue_jobs.generate import generate
    from glue_jobs.session import local_session

    with tempfile.TemporaryDirectory() as work:
        expect = generate(Path(work), records=args.records, files=1, bad_ratio=0.0, seed=5, shape=args.shape)
        lines = (Path(work) / "events-00000.json").read_text(encoding="utf-8").splitlines()
    spark = local_session("fast-path-census", master="local[2]")
    try:
        found = census(spark, lines)
    finally:
        spark.stop()
    print(f"{len(lines)} valid {args.shape} records ({expect.duplicates} of them copies); handed to the strict parse:")
    for shape, (count, slow) in sorted(found.items(), key=lambda item: -item[1][1]):
        print(f"  {shape:<18} {count:>7} records  {slow:>7} not proven ({slow / count:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
