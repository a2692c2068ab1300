"""Operations tools for the streaming lake: `python -m tools --help`, docs/operations.md."""
