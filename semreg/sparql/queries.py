"""The SPARQL the server runs, kept as files in `queries/` at the top of the project (`semreg.shipped`)."""
from __future__ import annotations

from semreg.shipped import example_queries, query

examples = example_queries


def delete_instance(instance_iri: str) -> str:
    return query("delete-instance.ru").replace("%INSTANCE%", f"<{instance_iri}>")
