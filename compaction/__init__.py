"""Hourly lake compaction: rewrite the small files of closed hour partitions into files near a target
size, removing duplicate event_ids, crash-safe through a journal (DESIGN.md invariant 2).

Entry points: `python -m compaction run-local ...` (local CLI, __main__.py) and glue_entry.py (Glue).
The whole design - discovery rules, journal and recovery per phase, naming, metrics - is described in
docs/compaction.md. pyspark is only imported by the modules that need a session.
"""
