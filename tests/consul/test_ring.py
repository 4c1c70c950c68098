"""The Consul listener of each member of a ring (in this process, on one fake clock and one etcd in memory): a
registration through one member's listener is answered by another's, and a blocking read on one wakes when a
service it answers is deregistered through another. Cross-member waits poll with a deadline (`wait_for`): the
changes travel the followers' long polls over loopback."""
from __future__ import annotations

import httpx
import pytest
from support.inprocess_ring import InProcessRing
from support.server import wait_for


@pytest.fixture
def ring(tmp_path):
    r = InProcessRing(tmp_path / "ring")
    clients: list[httpx.AsyncClient] = []
    try:
        yield r, clients
    finally:
        for client in clients:
            r.run(client.aclose())
        r.close()


def consul_of(ring: InProcessRing, clients: list, node) -> httpx.AsyncClient:
    client = ring.call(lambda: httpx.AsyncClient(
        transport=httpx.ASGITransport(node.node.consul_app, client=("127.0.0.1", 40002)),
        base_url=f"http://{node.name}.consul.test", timeout=60))
    clients.append(client)
    return client


def test_each_member_s_listener_answers_for_the_ring_and_its_blocking_reads_wake_on_changes_elsewhere(ring):
    r, clients = ring
    a, b, _ = (r.add(name, consul_listen="127.0.0.1:8500") for name in ("a", "b", "c"))
    r.upload(a)
    ca, cb = consul_of(r, clients, a), consul_of(r, clients, b)
    for n in range(6):
        reply = r.run(ca.put("/v1/agent/service/register", json={
            "ID": f"livro-{n}", "Name": "livros", "Tags": ["ex:Livro ex:temUmGenero ex:Terror"], "Address": "10.0.0.1",
            "Port": 9000 + n, "Check": {"TTL": "60s", "Status": "passing"}}))
        assert reply.status_code == 200, reply.text
    r.settle()

    def listed() -> set[str]:
        return {e["Service"]["ID"] for e in r.run(cb.get("/v1/health/service/livros", params={"passing": "1"})).json()}
    wait_for(lambda: listed() == {f"livro-{n}" for n in range(6)}, 10, "b listing what a registered")
    index = r.run(cb.get("/v1/health/service/livros")).headers["X-Consul-Index"]
    waiting = r.start(cb.get("/v1/health/service/livros", params={"index": index, "wait": "60s"}))
    assert r.run(ca.put("/v1/agent/service/deregister/livro-3")).status_code == 200
    wait_for(waiting.done, 10, "b's blocking read woken by a deregistration through a")
    answer = waiting.result()
    assert int(answer.headers["X-Consul-Index"]) != int(index)
    assert "livro-3" not in {e["Service"]["ID"] for e in answer.json()}
    # every instance's tags read back as written, wherever it is held, and its TTL check updated through any member
    assert all(e["Service"]["Tags"] == ["ex:Livro ex:temUmGenero ex:Terror"] for e in answer.json())
    for n in (0, 1, 2, 4, 5):
        assert r.run(cb.put(f"/v1/agent/check/fail/service:livro-{n}")).status_code == 200
    wait_for(lambda: listed() == set(), 10, "the failed checks seen through b")
    assert r.answered(a, "PUT", "/v1/queries/obras-de-terror", json={
        "s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror", "match": "all"}).status_code in (200, 201)
    assert r.run(ca.put("/v1/agent/check/pass/service:livro-5")).status_code == 200
    wait_for(lambda: {e["Service"]["ID"] for e in r.run(cb.get("/v1/health/service/obras-de-terror")).json()}
             == {"livro-5"}, 10, "b answering the saved query's name by meaning")


def test_maintenance_through_any_member_drains_every_copy_and_never_renews_a_lease(ring):
    """Maintenance sets the status without a heartbeat, through the owner that runs the lease (another member's
    over the ring's internal API where it is not the one asked), which sends it on to the other owners: every copy
    drains, and once the leases lapsed, switching maintenance brings none of them back."""
    r, clients = ring
    a, b, c = (r.add(name, consul_listen="127.0.0.1:8500") for name in ("a", "b", "c"))
    r.upload(a)
    ca, cb, cc = (consul_of(r, clients, n) for n in (a, b, c))
    ids = [f"livro-{n}" for n in range(6)]
    for n, sid in enumerate(ids):
        assert r.run(ca.put("/v1/agent/service/register", json={
            "ID": sid, "Name": "livros", "Address": "10.0.0.1", "Port": 9000 + n,
            "Check": {"TTL": "20s", "Status": "passing"}})).status_code == 200
    r.settle()

    def copies() -> dict[str, set[str]]:
        """Each instance's status in every copy held, on every member."""
        held: dict[str, set[str]] = {}
        for node in (a, b, c):
            for sid in ids:
                inst = r.call(lambda node=node, sid=sid: node.node.shard.registry.instances.get(sid))
                if inst is not None:
                    held.setdefault(sid, set()).add(inst.status)
        return held
    for sid in ids:
        assert r.run(cb.put(f"/v1/agent/service/maintenance/{sid}", params={"enable": "True"})).status_code == 200
    wait_for(lambda: copies() == {sid: {"draining"} for sid in ids}, 10, "every copy drained")
    assert r.run(cc.get("/v1/health/service/livros", params={"passing": "1"})).json() == []
    entries = r.run(cc.get("/v1/health/service/livros")).json()
    assert {e["Service"]["ID"] for e in entries} == set(ids)
    assert all({ch["CheckID"]: ch["Status"] for ch in e["Checks"]}[f"_service_maintenance:{e['Service']['ID']}"]
               == "critical" for e in entries)
    r.advance(21)  # no heartbeat since the registration: every lease lapsed, maintenance notwithstanding
    wait_for(lambda: copies() == {sid: {"critical"} for sid in ids}, 10, "every lease lapsed")
    for sid in ids:
        assert r.run(cc.put(f"/v1/agent/service/maintenance/{sid}", params={"enable": "false"})).status_code == 200
    r.settle()
    assert copies() == {sid: {"critical"} for sid in ids}
    # the maintenance ended where the status is kept: a service passing its check again comes back up
    assert r.run(ca.put("/v1/agent/check/pass/service:livro-0")).status_code == 200
    wait_for(lambda: copies()["livro-0"] == {"up"}, 10, "livro-0 up again on every copy")
    assert copies() == {"livro-0": {"up"}, **{sid: {"critical"} for sid in ids[1:]}}


@pytest.mark.parametrize("body", [b"", b"[]", b"null", b'{"status": "gone"}', b'{"status": 1}',
                                  b'{"status": "draining", "replaces": "up"}',
                                  b'{"status": "draining", "replaces": ["up", 2]}', b"{",
                                  b'{"status": "draining", "revision": "1"}', b'{"status": "draining", "revision": -4}',
                                  b'{"status": "draining", "revision": true}', b'{"status": "draining", "revision": 1.5}'])
def test_a_status_change_the_internal_api_cannot_take_is_a_400_that_changes_nothing(ring, body):
    r, clients = ring
    a = r.add("a", consul_listen="127.0.0.1:8500")
    r.upload(a)
    assert r.run(consul_of(r, clients, a).put("/v1/agent/service/register", json={
        "ID": "livro-0", "Name": "livros", "Port": 9000, "Check": {"TTL": "20s", "Status": "passing"}})).status_code == 200
    secret = {"X-Semreg-Cluster": r.secret.read_text().strip(), "Content-Type": "application/json"}
    answer = a.internal_request("POST", "/internal/v1/status/livro-0", content=body, headers=secret)
    assert answer.status_code == 400, answer.text
    assert a.get("/v1/instances/livro-0").json()["status"] == "up"
    assert a.internal_request("POST", "/internal/v1/status/nobody", json={"status": "up"},
                              headers=secret).status_code == 404
