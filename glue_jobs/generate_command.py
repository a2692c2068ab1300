"""The `generate` command (`streamlake generate`): records for one dataset (glue_jobs/dataset_generate.py,
clickstream's own glue_jobs/generate.py) or, with --route-field and --route, a mix of a routed stream's datasets
(`generate_routed`): each record carries its dataset's route value, with a share no route takes. Local tool (not in
the job zip); the rehearsal holds a routed source's input with `generate_routed`."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from glue_jobs.dataset_generate import Expectation, RecordMaker, decimal_literal, put
from glue_jobs.datasets import Dataset


@dataclass
class RoutedExpectation:
    """What a routed source must make of a mix (glue_jobs/routed_batch.py): each dataset's part as one dataset's files
    would be, and the payloads no route takes (their dead letters' payloads, reason `unroutable` or the adapter's)."""

    records: int = 0
    parts: dict[str, Expectation] = field(default_factory=dict)
    unroutable: list[str] = field(default_factory=list)


def routed_value(payload: str, path: str) -> str | None:
    """The route field's value as the router compares it (glue_jobs/decoding/routes.py: a string token's value), or
    None when the payload is not a JSON object or the path holds no string."""
    try:
        node = json.loads(payload)
    except ValueError:
        return None
    for name in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node if isinstance(node, str) else None


def generate_routed(datasets: dict[str, Dataset], field_path: str, routes: dict[str, str], out_dir: str | Path, *,
                    records: int, files: int = 10, bad_ratio: float = 0.01, unroutable_ratio: float = 0.02,
                    duplicate_ratio: float = 0.005, hours: int = 48, seed: int = 7, end: datetime | None = None,
                    prefix: str = "routed") -> RoutedExpectation:
    """NDJSON files mixing the datasets of `routes` ({value: dataset}) in about equal shares, each record carrying its
    route value at `field_path`: valid records, bad ones of each reason (one that loses its route field or its JSON
    is unroutable, as the router sees it), repeats of a dataset's valid record, and about `unroutable_ratio` records of
    a value no route names or without the field."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    values, rng = sorted(routes), random.Random(seed + 1)
    makers = {v: RecordMaker(datasets[routes[v]], seed + i, pinned={field_path: v}) for i, v in enumerate(values)}
    expect = RoutedExpectation(parts={routes[v]: Expectation() for v in values})
    end = end or datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    lines: list[str] = []
    valid_lines: dict[str, list[str]] = {name: [] for name in expect.parts}
    for n in range(records):
        value, at = rng.choice(values), end - timedelta(seconds=rng.randint(1, hours * 3600))
        maker, name = makers[value], routes[value]
        part, roll = expect.parts[name], rng.random()
        if roll < unroutable_ratio:  # a value no route names, or the field null
            record = maker.valid(n, at)
            put(record, field_path, f"unclaimed-{n}" if n % 2 == 0 else None)
            payload = decimal_literal(record)
        elif roll < unroutable_ratio + bad_ratio:
            payload, reason = maker.bad(n, at)
            if routed_value(payload, field_path) == value:
                part.bad_by_reason[reason] = part.bad_by_reason.get(reason, 0) + 1
                part.bad_payloads.append(payload)
        elif valid_lines[name] and rng.random() < duplicate_ratio:
            payload = rng.choice(valid_lines[name])
            part.duplicates += 1
        else:
            record = maker.valid(n, at)
            payload = decimal_literal(record)
            valid_lines[name].append(payload)
            part.valid_keys.append(str(record[datasets[name].key[0]]))
        if routed_value(payload, field_path) == value:
            part.records += 1
        else:
            expect.unroutable.append(payload)
        lines.append(payload)
    for i in range(files):
        chunk = lines[i::files]
        (out / f"{prefix}-{i:05d}.json").write_text("\n".join(chunk) + ("\n" if chunk else ""), encoding="utf-8")
    expect.records = len(lines)
    return expect


def run_generate(parser, args, routes) -> int:
    """Write the records `args` asks for (`routes`: the RouteTable of --route-field/--route, or None) and print the
    summary line; with --expect, what the job must make of them as JSON."""
    from glue_jobs import datasets

    sizes = dict(records=args.records, files=args.files, bad_ratio=args.bad_ratio, duplicate_ratio=args.duplicate_ratio,
                 seed=args.seed)
    if args.shape != "generated" and (routes is not None or args.dataset != "clickstream"):
        parser.error(f"--shape {args.shape} is clickstream's generator only, not {args.dataset or 'a routed mix'}'s")
    if routes is not None:
        tables = {name: datasets.load(name) for name in routes.datasets}
        problems = routes.problems(tables)  # a dataset without the field as a string: no record of it would route
        if problems:
            parser.error("; ".join(problems))
        expect = generate_routed(tables, routes.field, dict(routes.routes), args.out, **sizes)
        if args.expect:
            document = {"records": expect.records, "unroutable": expect.unroutable,
                        "parts": {name: part.__dict__ for name, part in expect.parts.items()}}
            Path(args.expect).write_text(json.dumps(document), encoding="utf-8")
        shares = ", ".join(f"{name} {part.records} ({len(part.valid_keys)} valid, {len(part.bad_payloads)} bad, "
                           f"{part.duplicates} duplicates)" for name, part in sorted(expect.parts.items()))
        print(f"wrote {expect.records} records routed by {routes.field} in {args.files} files to {args.out}: {shares}, "
              f"{len(expect.unroutable)} unroutable")
        return 0
    if args.dataset == "clickstream":  # its own generator: realistic sessions and every kind of bad record
        from glue_jobs.generate import generate

        expect = generate(args.out, **sizes, shape=args.shape)
        valid = len(expect.valid_event_ids)
    else:
        from glue_jobs.dataset_generate import generate_dataset

        expect = generate_dataset(datasets.load(args.dataset), args.out, **sizes)
        valid = len(expect.valid_keys)
    if args.expect:
        with open(args.expect, "w", encoding="utf-8") as handle:
            json.dump(expect.__dict__, handle)
    print(f"wrote {expect.records} {args.dataset} records in {args.files} files to {args.out}: {valid} valid, "
          f"{sum(expect.bad_by_reason.values())} bad {expect.bad_by_reason}, {expect.duplicates} duplicates")
    return 0
