"""Spark SQL settings changed for one piece of work and restored afterwards."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def session_conf(spark, settings: dict[str, str]):
    """The SQL settings in `settings` for the duration of the block; afterwards (also after an error) each
    key is back as it was: its earlier value, or unset. Spark reads most of them when a query is planned
    (a cache defined, a micro-batch planned), so the block must cover that, not only the action."""
    conf = spark.conf
    previous = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)
