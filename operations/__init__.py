"""Operations tools for the streaming lake: `streamlake --help` (or `python -m operations --help`), docs/operations.md."""
