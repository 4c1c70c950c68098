"""The case study on a running app: the obras ontology uploaded and the saved query `obras-de-terror` (works of
horror, by meaning), which the Consul tests read as a service name."""
from __future__ import annotations

from typing import Any

from support.paths import ONTOLOGIES

SAVED_QUERY = "obras-de-terror"


def horror_by_meaning(client: Any) -> None:
    """Upload obras and save the query, through `client` (an in-process app's public client)."""
    r = client.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                   headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    r = client.put(f"/v1/queries/{SAVED_QUERY}", json={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"})
    assert r.status_code in (200, 201), r.text
