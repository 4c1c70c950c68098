"""A backup through a ring (docs/how-to/backup-restore.md): every member's records gathered as anti-entropy
gathers them, each instance once at its newest revision, none whose newest revision anywhere is a removal,
whatever stale copies some member still holds; a restore puts each instance on its owners; and a backup taken
while writers run restores to a node alone and to a ring with the same answers."""
from __future__ import annotations

import gzip
import io
import re
from concurrent.futures import wait
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st
from support.backups import Writers, answers, backup_ids, semreg
from support.inprocess import InProcess
from support.inprocess_ring import InProcessRing, RingNode
from support.paths import ONTOLOGIES
from support.ring import body, load, upload
from support.server import wait_for

from semreg.registry import backups
from semreg.storage import backup_reading

GZ = {"Content-Type": "application/gzip"}


def answered(in_ring: InProcessRing, node: RingNode, method: str, url: str, **kw: Any) -> httpx.Response:
    """The answer to a request that changes an ontology: it comes once every member applied it, waiting on the
    ring's clock."""
    pending = in_ring.start(node.http.request(method, url, **kw))
    while not pending.done():
        in_ring.advance(0.1, step=0.1)
        if not pending.done():
            wait([pending], timeout=0.05)
    return pending.result()


def test_a_ring_backup_holds_each_instance_once_the_newest_copy_and_none_removed(in_ring: InProcessRing) -> None:
    n1, n2, n3 = in_ring.add("n1"), in_ring.add("n2"), in_ring.add("n3")
    r = answered(in_ring, n1, "PUT", "/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                 headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    secret = {"X-Semreg-Cluster": in_ring.secret.read_text().strip()}
    r = n1.request("POST", "/v1/instances/batch", json={"instances": [body(n) for n in range(40)]})
    assert r.status_code == 200, r.text
    def export(node: RingNode, iid: str) -> list:
        return node.internal_request("POST", "/internal/v1/export", json={"ids": [iid]}, headers=secret).json()["items"]

    # the copies as they were, before a replacement and a removal
    stale = [next(item for node in (n1, n2, n3) for item in export(node, f"i{n:04d}")) for n in (3, 4)]
    assert n2.put("/v1/instances/i0003", json=body(3, service="replaced")).status_code == 200
    assert n3.delete("/v1/instances/i0004").status_code == 204
    for node in (n1, n2, n3):  # every member is offered the stale copies; whoever holds nothing newer keeps one
        r = node.internal_request("POST", "/internal/v1/restore", json={"items": stale}, headers=secret)
        assert r.status_code == 200, r.text
    r = n1.get("/v1/backup")
    assert r.status_code == 200, r.text
    text = gzip.decompress(r.content).decode()
    ids = re.findall(r'<https://w3id.org/semreg#id> "([^"]+)"', text)
    assert sorted(ids) == sorted(f"i{n:04d}" for n in range(40) if n != 4)  # each once, the removed one not at all
    with backup_reading.read(io.BytesIO(r.content)) as contents:
        by_id = {rec["id"]: rec for rec, _ in contents.records}
    assert by_id["i0003"]["service"] == "replaced"

    target = InProcess().start()
    try:
        t = target.client()
        assert t.post("/v1/restore", content=r.content, headers=GZ).status_code == 200
        listed = {i["id"]: i["service"] for i in t.get("/v1/instances", params={"environment": "*"}).json()}
        ring = {i["id"]: i["service"] for i in n2.get("/v1/instances", params={"environment": "*"}).json()}
        assert listed == ring and listed["i0003"] == "replaced"
    finally:
        target.stop()


def test_a_restore_into_a_ring_puts_each_instance_on_its_owners(in_ring: InProcessRing) -> None:
    source = InProcess().start()
    try:
        c = source.client()
        upload(c)
        assert c.post("/v1/instances/batch", json={"instances": [body(n) for n in range(30)]}).status_code == 200
        data = c.get("/v1/backup").content
        before = c.get("/v1/instances").json()
    finally:
        source.stop()
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    r = answered(in_ring, n2, "POST", "/v1/restore", content=data, headers=GZ)
    assert r.status_code == 200 and r.json() == {"instances": 30, "ontologies": 1, "prefixes": 0, "queries": 0}, r.text
    for node in (n1, n2):  # replicas = 2: every member holds every instance, and the ontology
        assert len(node.node.shard.registry.instances) == 30
        assert [o["name"] for o in node.get("/v1/ontologies").json()] == ["obras"]
    after = n1.get("/v1/instances").json()
    keep = ("id", "service", "tags", "meta", "registered_at", "weight")
    assert [{k: i[k] for k in keep} for i in after] == [{k: i[k] for k in keep} for i in before]
    again = n1.request("POST", "/v1/restore", content=data, headers=GZ)
    assert again.status_code == 409 and "force" in again.json()["error"]


def test_a_backup_taken_while_writers_run_restores_alike_to_a_node_and_to_a_ring(start_server, ring, tmp_path) -> None:
    source, fresh = start_server(), start_server()
    with httpx.Client(base_url=source.url, timeout=30) as c:
        upload(c)
        load(c)
    path = tmp_path / "busy.nq.gz"
    with Writers(source.url) as writers:
        wait_for(lambda: writers.writes >= 40, 30, "writers at work")
        done = semreg("backup", str(path), "--url", source.url)
        assert writers.writes >= 40
    assert done.returncode == 0, done.stderr
    assert not writers.errors, writers.errors[:3]
    ids = backup_ids(path)
    assert any(i.startswith("i1") for i in ids) and any(i.startswith("i4") for i in ids)  # writers' instances in it
    for url in (fresh.url, ring.nodes[1].url):
        restored = semreg("restore", str(path), "--url", url)
        assert restored.returncode == 0, restored.stderr
    with httpx.Client(base_url=fresh.url, timeout=30) as f, ring.nodes[2].client() as r:
        alone, ringed = answers(f), answers(r)
    assert [i["id"] for i in alone["instances"]] == ids
    for key in alone:
        assert ringed[key] == alone[key], key


revisions = st.dictionaries(st.sampled_from([f"i{k}" for k in range(30)]),
                            st.integers(1, 50).flatmap(lambda r: st.sampled_from([r, -r])), max_size=30)


@given(st.lists(revisions, min_size=1, max_size=4))
def test_a_ring_backup_exports_each_instance_once_from_a_holder_of_its_newest_revision(inventories):
    """The merge of the members' inventories, done off the event loop: each id at its newest revision, from a
    shard that holds it at that revision; removals (negative) left out; each shard's ids sorted, asked once."""
    shards = [object() for _ in inventories]
    newest = backups.newest_of(list(zip(shards, inventories, strict=True)))
    for iid, (revision, shard) in newest.items():
        held = [inv[iid] for inv in inventories if iid in inv]
        assert abs(revision) == max(abs(r) for r in held)
        assert inventories[shards.index(shard)][iid] == revision
    groups = backups.by_holder(newest)
    exported = [iid for _, ids in groups for iid in ids]
    assert sorted(exported) == sorted(iid for iid, (revision, _) in newest.items() if revision > 0)
    assert len(exported) == len(set(exported)) and all(ids == sorted(ids) for _, ids in groups)
    assert all(newest[iid][1] is shard for shard, ids in groups for iid in ids)
