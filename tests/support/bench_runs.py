"""`semreg bench` run as a user runs it, in a child process: one scenario at `--quick` sizes, its figures read from
the one JSON object it prints (the run must succeed and the scenario must not report an error)."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from support.paths import ROOT


def quick_bench(name: str, *flags: str, timeout_s: float) -> dict[str, Any]:
    """The figures of scenario `name` from `semreg bench --quick --only NAME FLAGS --json`."""
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--quick", "--only", name, *flags, "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures: dict[str, Any] = json.loads(done.stdout)["scenarios"][name]
    assert "error" not in figures, figures["error"]
    return figures
