"""The internal API's requests (`semreg.http.internal`): a body or a parameter of the wrong shape is the sender's
fault, a 400 that changes nothing, on every kind of route and for any JSON sent; an error raised inside this
member's shard is its own failure, a 500 logged as unexpected, which the sender takes for a member failing
(`ShardUnavailable`: another owner is asked) and never passes on to its client as a 400."""
from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess_ring import InProcessRing, RingNode

from semreg.cluster.peer import RemoteShard
from semreg.errors import SemregError
from semreg.registry.shard import ShardUnavailable


def registration(iid: str, **fields: Any) -> dict[str, Any]:
    return {"id": iid, "service": "svc", "address": "127.0.0.1", "port": 10000, "ttl": 0,
            "tags": ["https://example.org/a https://example.org/p https://example.org/b"], **fields}


def record(iid: str, **fields: Any) -> dict[str, Any]:
    """A registration's durable record, as another owner hands it over."""
    return {"id": iid, "service": "svc", "address": "127.0.0.1", "port": 10000, "scheme": "http",
            "tags": [["https://example.org/a", "https://example.org/p", "https://example.org/b"]], "weight": 1,
            "capacity": None, "ttl": 0.0, "deregister_after": 90.0, "check": None, "meta": {}, "owner": None,
            "environment": "default", **fields}


def secret(in_ring: InProcessRing) -> dict[str, str]:
    return {"X-Semreg-Cluster": in_ring.secret.read_text().strip()}


def sent(in_ring: InProcessRing, node: RingNode, method: str, path: str, **kw: Any) -> httpx.Response:
    """A request to `node`'s listener app; an error the app raised is its answer (500), as a peer sees it."""
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(node.node.cluster_app, raise_app_exceptions=False, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://cluster.test") as client:
            return await client.request(method, "/internal/v1" + path, headers=secret(in_ring), **kw)
    return in_ring.run(send())


def held(in_ring: InProcessRing, node: RingNode) -> Any:
    """What a request could change on `node`: its instances (versions, load, status, lease), tombstones, records
    and change log."""
    async def read() -> Any:
        shard = node.node.shard
        instances = {iid: (i.revision, i.state_version, i.load, i.admin_status, i.last_heartbeat, i.expired)
                     for iid, i in shard.registry.instances.items()}
        return (instances, dict(shard.registry.tombstones), node.node.store.revisions(), node.node.changelog.cursor)
    return in_ring.run(read())


@pytest.fixture
def member(in_ring: InProcessRing) -> RingNode:
    """A member alone on its ring, holding two instances (one with a load and a status to lose)."""
    n1 = in_ring.add("n1")
    for iid in ("kept", "other"):
        assert n1.put(f"/v1/instances/{iid}", json=registration(iid)).status_code == 201
    assert sent(in_ring, n1, "POST", "/heartbeat/kept", json={"load": 0.5, "status": "draining"}).status_code == 200
    return n1


MALFORMED = [  # (method, path, a body or parameters of the wrong shape)
    ("POST", "/records", {"json": {"items": [[{"id": "x"}, 5]]}}),  # no service
    ("POST", "/records", {"json": {"items": [[record("new"), 9], [record("bad", port="eighty"), 9]]}}),
    ("POST", "/records", {"json": {"items": [[record("new"), 9]], "view": "ab"}}),
    ("POST", "/records", {"json": [1, 2]}),
    ("POST", "/restore", {"json": {"items": [[record("new"), 9], [record("bad", check={"interval": "soon"}), 9]]}}),
    ("POST", "/restore", {"json": {"items": [[{"id": ["kept"], "deleted": True}, 99]]}}),
    ("POST", "/restore", {"json": {"items": [[record("new", admin_status="asleep"), 9]]}}),
    ("POST", "/delete", {"json": {"items": [["kept", 2**62], ["other"]]}}),  # the first not applied either
    ("POST", "/delete", {"json": {"items": [[["kept"], 2**62]]}}),
    ("POST", "/heartbeat/kept", {"json": {"load": "heavy"}}),
    ("POST", "/heartbeat/kept", {"json": {"status": "asleep"}}),
    ("POST", "/heartbeat/kept", {"json": [1]}),
    ("POST", "/status/kept", {"json": {"status": "asleep"}}),
    ("POST", "/states", {"json": {"states": [["kept", 1, 10**9, 3, True, True]]}}),
    ("POST", "/states", {"json": {"states": [[["kept"], 1, 10**9, "up", True, True]]}}),
    ("POST", "/export", {"json": {"ids": 5}}),
    ("POST", "/registered-by", {"json": {"ids": None}}),
    ("POST", "/discover", {"json": {"query": {"tag": [1, 2, 3], "match": ["exact"]}}}),
    ("POST", "/discover", {"json": {"query": {"tag": ["https://example.org/a"], "match": ["similar", "similar>=x"]}}}),
    ("POST", "/discover", {"json": {"query": {"all": [["a"]], "match": ["exact"], "service": ["svc"]}}}),
    ("POST", "/holders", {"json": {"tags": [[["https://example.org/a"]]]}}),
    ("POST", "/matching-tags", {"json": {"tag": ["https://example.org/a"], "match": [1]}}),
    ("POST", "/tags", {"json": {"selector": [1]}}),
    ("POST", "/counts", {"json": {"environments": 5}}),
    ("POST", "/inventory", {"json": {"ids": [["kept"]]}}),
    ("POST", "/digests", {"json": {"checksum": "x", "arcs": []}}),
    ("GET", "/changes", {"params": {"after": "x"}}),
    ("GET", "/changes", {"params": {"after": "0", "wait": "nan"}}),
]


@pytest.mark.parametrize("method, path, request_kw", MALFORMED)
def test_a_malformed_request_on_each_kind_of_route_is_a_400_and_changes_nothing(
        in_ring: InProcessRing, member: RingNode, method: str, path: str, request_kw: dict[str, Any]) -> None:
    before = held(in_ring, member)
    r = sent(in_ring, member, method, path, **request_kw)
    assert r.status_code == 400, r.text
    assert r.json()["error"]
    in_ring.settle()
    assert held(in_ring, member) == before


# any JSON at all, and bodies shaped as the routes' own with any JSON in their places
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=8) | st.sampled_from(["kept", "up", "similar>=x", "https://example.org/a"]),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=12)
ROUTE_BODIES = {
    "/records": st.fixed_dictionaries({"items": st.lists(st.tuples(st.builds(
        lambda fields: record("new", **fields), st.dictionaries(st.sampled_from(sorted(record("x"))), JSON, max_size=3)),
        JSON).map(list), max_size=2)}),
    "/restore": st.fixed_dictionaries({"items": st.lists(st.tuples(st.builds(
        lambda fields: record("kept", **fields), st.dictionaries(
            st.sampled_from([*sorted(record("x")), "deleted", "admin_status", "registered_at"]), JSON, max_size=3)),
        JSON).map(list), max_size=2)}),
    "/delete": st.fixed_dictionaries({"items": st.lists(st.lists(JSON, min_size=2, max_size=2), max_size=2)}),
    "/states": st.fixed_dictionaries({"states": st.lists(st.lists(JSON, min_size=6, max_size=6), max_size=2)}),
    "/heartbeat/kept": st.dictionaries(st.sampled_from(["load", "status", "revision"]), JSON),
    "/discover": st.fixed_dictionaries({"query": st.dictionaries(
        st.sampled_from(["tag", "all", "provided", "match", "service", "selector"]), JSON)}),
    "/holders": st.fixed_dictionaries({"tags": st.lists(JSON, max_size=3)}),
    "/matching-tags": st.dictionaries(st.sampled_from(["tag", "match"]), JSON),
    "/inventory": st.fixed_dictionaries({"ids": JSON}),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(sorted(ROUTE_BODIES)), data=st.data())
def test_any_json_to_a_route_is_answered_never_a_500_and_a_400_changes_nothing(
        in_ring: InProcessRing, path: str, data: st.DataObject) -> None:
    if not in_ring.nodes:
        n1 = in_ring.add("n1")
        assert n1.put("/v1/instances/kept", json=registration("kept")).status_code == 201
    n1 = in_ring.nodes["n1"]
    body = data.draw(JSON | ROUTE_BODIES[path], label="body")
    before = held(in_ring, n1)
    r = sent(in_ring, n1, "POST", path, json=body)
    assert r.status_code in (200, 400, 404), r.text  # 404: a heartbeat for an instance no longer held
    if r.status_code != 200:
        in_ring.settle()
        assert held(in_ring, n1) == before


@pytest.mark.parametrize("method, path, request_kw, raising", [
    ("POST", "/inventory", {"json": {"ids": ["kept"]}}, "inventory"),
    ("POST", "/heartbeat/kept", {"json": {"load": 0.25}}, "heartbeat"),
    ("POST", "/export", {"json": {"ids": ["kept"]}}, "export"),
    ("POST", "/restore", {"json": {"items": [[record("kept"), 10**15]]}}, "restore_records"),
    ("GET", "/instances/kept", {}, "get"),
])
def test_an_error_inside_the_shard_is_a_500_logged_as_unexpected_never_a_400(
        in_ring: InProcessRing, member: RingNode, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        method: str, path: str, request_kw: dict[str, Any], raising: str) -> None:
    async def broken(*args: Any, **kw: Any) -> Any:
        raise TypeError("a bug of this member: 'NoneType' object is not subscriptable")

    monkeypatch.setattr(member.node.shard, raising, broken)
    caplog.set_level(logging.ERROR, logger="semreg.internal")
    r = sent(in_ring, member, method, path, **request_kw)
    assert r.status_code == 500, r.text
    assert r.json() == {"error": "the node failed to handle this request; its log says why."}  # nothing leaked
    logged = [rec for rec in caplog.records if rec.name == "semreg.internal" and rec.getMessage() == "unexpected error"]
    assert len(logged) == 1 and logged[0].exc_info is not None and logged[0].exc_info[0] is TypeError
    assert logged[0].path == "/internal/v1" + path


def test_the_sender_takes_a_member_s_error_for_a_failing_member_and_a_malformed_request_for_a_400(
        in_ring: InProcessRing, member: RingNode, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any, **kw: Any) -> Any:
        raise KeyError("a bug of this member")

    async def ask() -> tuple[BaseException, BaseException]:
        peer = RemoteShard("n1", member.url, secret(in_ring)["X-Semreg-Cluster"])
        try:
            with pytest.raises(SemregError) as malformed:
                await peer.call("POST", "/inventory", {"ids": [["kept"]]})
            monkeypatch.setattr(member.node.shard, "inventory", broken)
            with pytest.raises(ShardUnavailable) as failing:
                await peer.inventory(["kept"])
            return malformed.value, failing.value
        finally:
            await peer.close()

    malformed, failing = in_ring.run(ask())
    assert isinstance(malformed, SemregError) and malformed.status == 400
    assert "a malformed node-to-node request" in malformed.message
    assert isinstance(failing, ShardUnavailable) and failing.member == "n1" and "HTTP 500" in failing.reason


def test_a_heartbeat_whose_first_owner_fails_inside_goes_to_the_next_owner_not_back_to_the_client_as_a_400(
        in_ring: InProcessRing, monkeypatch: pytest.MonkeyPatch) -> None:
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    iid = next(i for i in (f"h{n}" for n in range(1000)) if n2.cluster.placement.owners(i)[0][0] == "n1")
    assert n2.put(f"/v1/instances/{iid}", json=registration(iid)).status_code == 201

    async def broken(*args: Any, **kw: Any) -> Any:
        raise TypeError("a bug of n1")

    monkeypatch.setattr(n1.node.shard, "heartbeat", broken)
    r = n2.put(f"/v1/instances/{iid}/heartbeat", json={"load": 0.5})
    assert r.status_code == 200, r.text  # n2, the other owner, renewed it
    assert in_ring.call(lambda: n2.node.shard.registry.instances[iid].load) == 0.5
