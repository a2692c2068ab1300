"""Operations tools for the streaming lake: `python -m operations --help`, docs/operations.md."""
