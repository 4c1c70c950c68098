"""The SPARQL the server runs, kept as files in `queries/` at the top of the project (installed into
`<prefix>/share/semreg/queries` by a non-editable install)."""
from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

_CANDIDATES = (Path(__file__).resolve().parents[2] / "queries", Path(sys.prefix) / "share" / "semreg" / "queries")


@cache
def load(name: str) -> str:
    for directory in _CANDIDATES:
        path = directory / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"the query file {name} is missing from {', '.join(map(str, _CANDIDATES))}")


def examples() -> dict[str, str]:
    """The example queries (`*.rq`; the update the server runs is `.ru`), by file name."""
    for directory in _CANDIDATES:
        if directory.is_dir():
            return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.glob("*.rq"))}
    return {}


def delete_instance(instance_iri: str) -> str:
    return load("delete-instance.ru").replace("%INSTANCE%", f"<{instance_iri}>")
