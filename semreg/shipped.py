"""Files semreg ships beside its code, found in a checkout (`queries/` at the top of the project) or where a
non-editable install puts them (`<prefix>/share/semreg/queries`): the SPARQL the server runs and the example
queries a user, the console and the benchmark read."""
from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

QUERY_DIRS = (Path(__file__).resolve().parents[1] / "queries", Path(sys.prefix) / "share" / "semreg" / "queries")


@cache
def query(name: str) -> str:
    """The text of the query file `name`."""
    for directory in QUERY_DIRS:
        path = directory / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"the query file {name} is missing from {', '.join(map(str, QUERY_DIRS))}")


def example_queries() -> dict[str, str]:
    """The example queries (`*.rq`; the update the server runs is `.ru`), by file name."""
    for directory in QUERY_DIRS:
        if directory.is_dir():
            return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.glob("*.rq"))}
    return {}
