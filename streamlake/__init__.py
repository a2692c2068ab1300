"""`streamlake`: the one command operators and developers run (streamlake/cli.py)."""
