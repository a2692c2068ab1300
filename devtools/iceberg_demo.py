"""`make demo`'s Iceberg steps: a dataset switched to Iceberg through its files only, and the table read back by
pyiceberg (a reader the project did not write).

    python -m devtools.iceberg_demo switch --out DIR --dataset orders   # DIR/<every dataset>, that one iceberg
    python -m devtools.iceberg_demo read --lake DIR --dataset orders    # rows, distinct keys, snapshots and their tags
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def switch(out: Path, dataset: str) -> Path:
    """A copy of datasets/ in `out` whose `dataset` says `"table_format": "iceberg"` (nothing else changes)."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(REPO / "datasets", out)
    contract_file = out / dataset / "dataset.json"
    if not contract_file.is_file():
        raise ValueError(f"no dataset {dataset!r} under {REPO / 'datasets'}")
    contract = json.loads(contract_file.read_text())
    contract_file.write_text(json.dumps({**contract, "table_format": "iceberg"}, indent=2) + "\n")
    return out


def local_catalog(lake: Path, name: str = "lake"):
    """pyiceberg's SQL catalog over the local runner's JDBC catalog file in `lake` (glue_jobs/session.py). `name`: the
    Spark catalog's name, which the JDBC catalog stores with every table (the local runner's is `lake`)."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(name, uri=f"sqlite:///{lake.resolve() / 'catalog.sqlite'}", warehouse=lake.resolve().as_uri())


def read(lake: Path, dataset: str) -> dict:
    """The local Iceberg table as pyiceberg's SQL catalog reads it."""
    from glue_jobs.datasets import load
    from glue_jobs.local_runner import LOCAL_ICEBERG_NAMESPACE

    table = local_catalog(lake).load_table(f"{LOCAL_ICEBERG_NAMESPACE}.{dataset}")
    rows = table.scan().to_arrow()
    keys = list(zip(*(rows.column(k).to_pylist() for k in load(dataset).key), strict=True))
    return {"rows": rows.num_rows, "distinct_keys": len(set(keys)), "data_files": len(list(table.scan().plan_files())),
            "snapshots": len(table.snapshots()),
            "batch_tags": [s.summary.additional_properties.get("streamlake.batch") for s in table.snapshots()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.iceberg_demo", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command", help="what to do")
    s = commands.add_parser("switch", help="copy datasets/ with one dataset switched to Iceberg", allow_abbrev=False)
    s.add_argument("--out", required=True, type=Path,
                   help="folder to copy datasets/ into (DIR/<every dataset>; deleted first if it exists)")
    s.add_argument("--dataset", required=True, help="the dataset whose copy's table_format becomes iceberg")
    r = commands.add_parser("read", help="read a local Iceberg table back with pyiceberg", allow_abbrev=False)
    r.add_argument("--lake", required=True, type=Path, help="the local lake holding the Iceberg catalog (catalog.sqlite)")
    r.add_argument("--dataset", required=True, help="the dataset whose table to read")
    args = parser.parse_args(argv)
    try:
        if args.command == "switch":
            print(f"datasets with {args.dataset} as Iceberg: {switch(args.out, args.dataset)}")
            return 0
        found = read(args.lake, args.dataset)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    tags = [t for t in found["batch_tags"] if t]
    print(f"pyiceberg: {found['rows']} rows, {found['distinct_keys']} distinct keys, {found['data_files']} data files, "
          f"{found['snapshots']} snapshots ({len(tags)} micro-batch appends, {found['snapshots'] - len(tags)} maintenance)")
    return 0 if found["rows"] == found["distinct_keys"] else 1


if __name__ == "__main__":
    sys.exit(main())
