"""Putting the benchmark's data into the reference stores: etcd (JSON values) and the Oxigraph server."""
from __future__ import annotations

import base64

import httpx
import orjson

from semreg.bench.context import expect
from semreg.bench.peers import BenchError

# The graphs API.md names, for a server that cannot list its graphs.
KNOWN_GRAPHS = ("urn:semreg:registry", "urn:semreg:inferred")
EXPORT_PAGE = 50_000  # triples per CONSTRUCT: under semreg's result limit


def json_bytes(value) -> bytes:
    return orjson.dumps(value)


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def prefix_end(prefix: str) -> bytes:
    """etcd's `range_end` for every key starting with `prefix`: the prefix with its last byte plus one."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return b"\0"  # every key
    raw[-1] += 1
    return bytes(raw)


def etcd_range_body(prefix: str) -> bytes:
    return json_bytes({"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})


def etcd_get_body(key: str) -> bytes:
    return json_bytes({"key": _b64(key)})


def etcd_put_views(etcd_url: str, prefix: str, views: list[dict]) -> str:
    """Store each view as JSON under `prefix + id`; check the prefix read returns them all. Returns the prefix."""
    with httpx.Client(base_url=etcd_url, timeout=30) as http:
        for view in views:
            expect(http.post("/v3/kv/put", json={"key": _b64(prefix + str(view["id"])), "value": _b64(json_bytes(view))}))
        found = expect(http.post("/v3/kv/range", content=etcd_range_body(prefix),
                                 headers={"Content-Type": "application/json"})).json()
    if int(found.get("count", 0)) != len(views):
        raise BenchError(f"etcd holds {found.get('count', 0)} keys under {prefix}, not {len(views)}")
    return prefix


def semreg_graphs(http: httpx.Client) -> list[str]:
    """The named graphs semreg holds (by SPARQL), or the ones API.md names."""
    response = http.get("/sparql", params={"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }"},
                        headers={"Accept": "application/sparql-results+json"})
    if not response.is_success:
        return list(KNOWN_GRAPHS)
    return [row["g"]["value"] for row in response.json()["results"]["bindings"] if row["g"]["type"] == "uri"]


def copy_graphs(semreg: httpx.Client, oxigraph_url: str) -> dict[str, int]:
    """Copy every named graph of semreg into the same graph of the Oxigraph server (N-Triples, paged).

    With `--union-default-graph` on the Oxigraph side both servers then answer the same queries on the
    same data. Returns the triples copied per graph.
    """
    copied: dict[str, int] = {}
    with httpx.Client(base_url=oxigraph_url, timeout=300) as oxigraph:
        for graph in semreg_graphs(semreg):
            expect(oxigraph.delete("/store", params={"graph": graph}), 204, 404)
            copied[graph] = 0
            offset = 0
            while True:
                query = (f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }} "
                         f"LIMIT {EXPORT_PAGE} OFFSET {offset}")
                page = expect(semreg.post("/sparql", content=query.encode(),
                                          headers={"Content-Type": "application/sparql-query",
                                                   "Accept": "application/n-triples"})).content
                triples = page.count(b"\n")
                if triples:
                    expect(oxigraph.post("/store", params={"graph": graph}, content=page,
                                         headers={"Content-Type": "application/n-triples"}))
                copied[graph] += triples
                if triples < EXPORT_PAGE:
                    break
                offset += EXPORT_PAGE
    return copied
