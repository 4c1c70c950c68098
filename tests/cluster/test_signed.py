"""Records in etcd count only when signed with the cluster secret: a record written straight into etcd by
someone without the secret (a member, an ontology's removal, a prefix) is ignored and logged, on a ring of apps
in this process (`support.inprocess_ring`), and the signature itself, by table and by property."""
from __future__ import annotations

import logging
from collections.abc import Coroutine
from concurrent.futures import wait
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.inprocess_ring import InProcessRing, RingNode

from semreg.cluster.signed import record_key, sign, verify

KEY = record_key("in-process-ring-secret-0123456789abcdef")
TURTLE = b"@prefix ex: <http://example.org/> . ex:Livro a <http://www.w3.org/2002/07/owl#Class> .\n"


def upload(in_ring: InProcessRing, node: RingNode) -> httpx.Response:
    return answered(in_ring, node.http.put("/v1/ontologies/books", content=TURTLE,
                                        headers={"Content-Type": "text/turtle"}))


def answered(in_ring: InProcessRing, request: Coroutine[Any, Any, httpx.Response]) -> httpx.Response:
    """An ontology change's answer: it comes once every member applied it, waiting on the ring's clock."""
    pending = in_ring.start(request)
    while not pending.done():
        in_ring.advance(0.1, step=0.1)
        if not pending.done():
            wait([pending], timeout=0.05)
    return pending.result()



@pytest.mark.parametrize("name, stored", [
    ("/semreg/c/members/x", b""),
    ("/semreg/c/members/x", b'{"id": "x", "address": "http://127.0.0.1:1"}'),  # unsigned
    ("/semreg/c/members/x", sign(record_key("another secret of enough length"), "/semreg/c/members/x", b"{}")),
    ("/semreg/c/members/x", sign(KEY, "/semreg/c/members/y", b"{}")),  # moved to another key
    ("/semreg/c/members/x", sign(KEY, "/semreg/c/members/x", b"{}") + b" "),  # tampered with
    ("/semreg/c/members/x", sign(KEY, "/semreg/c/members/x", b"{}")[:64]),  # truncated
    ("/semreg/c/members/x", b"0" * 64 + b"\n{}"),
])
def test_what_was_not_signed_with_the_secret_for_this_key_does_not_verify(name: str, stored: bytes) -> None:
    assert verify(KEY, name, stored) is None


@given(st.text(max_size=80), st.binary(max_size=300))
def test_a_signed_record_verifies_as_itself_and_any_stored_bytes_verify_or_not_without_raising(
        name: str, value: bytes) -> None:
    assert verify(KEY, name, sign(KEY, name, value)) == value
    assert verify(KEY, name, value) is None


def test_records_written_into_etcd_without_the_secret_are_ignored_and_logged(
        in_ring: InProcessRing, caplog: pytest.LogCaptureFixture) -> None:
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    r = upload(in_ring, n1)
    assert r.status_code in (200, 201), r.text
    caplog.set_level(logging.WARNING, logger="semreg.cluster")

    async def forge() -> None:
        lease = await in_ring.etcd.grant(60)
        await in_ring.etcd.put("/semreg/test/members/evil",
                            orjson.dumps({"id": "evil", "address": "http://127.0.0.1:9", "state": "alive"}), lease)
        await in_ring.etcd.put("/semreg/test/ontologies/books", orjson.dumps({"deleted": True, "node": "n1"}))
        await in_ring.etcd.put("/semreg/test/prefixes/evil", b"http://evil.example/")
    in_ring.run(forge())
    in_ring.advance(2)
    for node in (n1, n2):
        assert node.get("/v1/ontologies/books").status_code == 200, node.name
    # one that reads the list afresh, too (the forged removal took the place of the ontology's record in etcd:
    # overwriting can hide a record from a newcomer, never make a node act on a forged one)
    n3 = in_ring.add("n3")
    for node in (n1, n2, n3):
        assert sorted(node.cluster.ring.members) == ["n1", "n2", "n3"], node.name
        assert "evil" not in node.node.knowledge.prefixes.explicit
    ignored = {rec.key for rec in caplog.records if "not signed with the cluster secret" in rec.getMessage()}
    assert ignored >= {"/semreg/test/members/evil", "/semreg/test/ontologies/books", "/semreg/test/prefixes/evil"}


def test_what_a_node_writes_is_signed_and_the_others_follow_it(in_ring: InProcessRing) -> None:
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    stored = in_ring.etcd.data["/semreg/test/members/n1"][0]
    assert verify(KEY, "/semreg/test/members/n1", stored) is not None
    r = upload(in_ring, n1)
    assert r.status_code in (200, 201) and n2.get("/v1/ontologies/books").status_code == 200
    assert answered(in_ring, n2.http.delete("/v1/ontologies/books")).status_code == 204
    in_ring.settle()
    assert n1.get("/v1/ontologies/books").status_code == 404
