"""A ring of real nodes with the case study's data: the same 300 instances through any client, so a ring and
a single node holding the same data can be compared answer for answer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from semreg.bench.localcluster import ClusterNode, LocalCluster
from support.paths import ONTOLOGIES
from support.server import wait_for

KINDS = ["Livro", "Filme", "Pintura", "Romance"]
GENRES = ["Terror", "Comedia", "Drama"]
ENVIRONMENTS = ("default", "default", "staging", "prod")  # of instance n: ENVIRONMENTS[n % 4], in `load`


def body(n: int, **kw: Any) -> dict[str, Any]:
    tags = [f"ex:{KINDS[n % 4]} ex:temUmGenero ex:{GENRES[n % 3]}", f"ex:Obra a ex:{KINDS[(n // 4) % 4]}"]
    return {"id": f"i{n:04d}", "service": f"svc{n % 7}", "address": "127.0.0.1", "port": 10000 + n, "tags": tags,
            "weight": 1 + n % 5, "capacity": 50, "meta": {"zone": "abc"[n % 3]}, "ttl": 0, **kw}


def new_ring(workdir: Path, n: int = 3) -> LocalCluster:
    cluster = LocalCluster(workdir, replicas=2, lease_s=2)
    try:
        cluster.start(n)
        wait_for(cluster.converged, 30, f"{n} nodes on one ring")
    except BaseException:
        cluster.close()
        raise
    return cluster


def upload(node: ClusterNode | Any) -> dict[str, Any]:
    client = node.client() if isinstance(node, ClusterNode) else node
    r = client.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                          headers={"Content-Type": "text/turtle"})
    assert r.status_code in (200, 201), r.text
    return r.json()


def load(client: Any) -> None:
    """The same data through any client: 300 instances in one batch over three environments, some moved from
    prod to staging, some deregistered, some drained, loads."""
    r = client.post("/v1/instances/batch", json={"instances": [body(n, environment=ENVIRONMENTS[n % 4])
                                                               for n in range(300)]})
    assert r.status_code == 200, r.text
    for n in range(3, 300, 40):  # prod to staging: each a replacement, with a new revision
        assert client.put(f"/v1/instances/i{n:04d}", json=body(n, environment="staging")).status_code == 200
    for n in range(0, 300, 50):
        assert client.delete(f"/v1/instances/i{n:04d}").status_code == 204
    for n in (n for n in range(1, 300, 37) if n % 50):
        r = client.put(f"/v1/instances/i{n:04d}/heartbeat", json={"status": "draining"})
        assert r.status_code == 200, r.text
    for n in (n for n in range(2, 300, 3) if n % 50):
        r = client.put(f"/v1/instances/i{n:04d}/heartbeat", json={"load": float(n % 11)})
        assert r.status_code == 200, r.text
