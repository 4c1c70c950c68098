"""Where things are: the tests, the project, the shared contract's data, the example ontologies."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # tests/
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
ONTOLOGIES = ROOT / "ontologies"
