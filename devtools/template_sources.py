"""The sources of a streaming Glue job as a synthesized template holds them, for readers of the template (make diff,
the tests): `--sources` is one JSON string (glue_jobs/job_arguments.py SOURCE_KEYS), which CloudFormation joins from text
and references (bucket names, bootstrap brokers) with Fn::Join. Read back, each value is the text it was, or the
reference itself where a value is one reference, or an Fn::Join of its text and references.
"""

from __future__ import annotations

import json
import re

_HOLE = "\u0000{}\u0000"
_HOLES = re.compile("\u0000(\\d+)\u0000")


def job_sources(default_arguments: dict) -> list[dict]:
    """Each source object of a streaming job's `--sources`, references kept as template expressions."""
    value = default_arguments["--sources"]
    references: list = []
    text = _text(value, references)
    return [{key: _value(item, references) for key, item in source.items()} for source in json.loads(text, strict=False)]


def source_arguments(default_arguments: dict) -> list[dict]:
    """Each source of the job as the flat `--name: value` arguments it runs with: the job's own (without
    `--sources`), then the source's keys."""
    job = {name: value for name, value in default_arguments.items() if name != "--sources"}
    return [{**job, **{f"--{key}": value for key, value in source.items()}} for source in job_sources(default_arguments)]


def _text(value, references: list) -> str:
    """The JSON text with each reference replaced by a numbered hole, a NUL-delimited index (json.dumps writes a NUL
    of a value as an escape, so no other raw NUL is in the text; json.loads takes the holes with strict=False)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        delimiter, parts = value["Fn::Join"]
        return delimiter.join(_text(part, references) for part in parts)
    references.append(value)
    return _HOLE.format(len(references) - 1)


def _value(item: str, references: list):
    parts = [references[int(piece)] if i % 2 else piece for i, piece in enumerate(_HOLES.split(item))]
    parts = [part for part in parts if part != ""]
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(part, str) for part in parts):
        return "".join(parts)
    return {"Fn::Join": ["", parts]} if parts else ""
