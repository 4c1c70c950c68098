"""The Python clients: pure retry/breaker/cache logic with a fake clock, then both clients against
real `semreg serve` processes over HTTP."""
from __future__ import annotations

import asyncio
import json
import random
import statistics
import threading
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.paths import ONTOLOGIES
from support.server import ServerProcess, free_port, wait_for

from semreg.client import (
    ApiError,
    AsyncClient,
    Client,
    NoInstanceAvailable,
    NotFound,
    RetryPolicy,
    RouteURL,
    SemregClientError,
    UnknownTermWarning,
    Unreachable,
)
from semreg.client.cache import LookupCache
from semreg.client.calls import Call, WatchState, error_from
from semreg.client.transport import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, Transport, backoff_s, parse_urls

EX = "http://example.org/obras#"
OBRAS = ONTOLOGIES / "obras.ttl"


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def next_within(iterator, timeout_s: float):
    """`next(iterator)`, failing the test instead of hanging when nothing comes."""
    got: list = []
    t = threading.Thread(target=lambda: got.append(next(iterator)), daemon=True)
    t.start()
    t.join(timeout_s)
    assert got, f"nothing came within {timeout_s} s"
    return got[0]


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# == pure logic =====================================================================================
@pytest.mark.parametrize("round_no, low, high", [
    (0, 0.0, 0.0),     # the first round goes at once
    (1, 0.05, 0.1),    # base 0.1 s, jittered into [half, full]
    (2, 0.1, 0.2),
    (3, 0.2, 0.4),
    (5, 0.8, 1.6),
    (6, 1.0, 2.0),     # capped at 2 s
    (30, 1.0, 2.0),
])
def test_backoff_is_exponential_capped_and_jittered(round_no, low, high):
    policy = RetryPolicy(backoff_base_s=0.1, backoff_cap_s=2.0)
    rng = random.Random(7)
    values = [backoff_s(round_no, policy, rng) for _ in range(300)]
    assert all(low <= v <= high for v in values)
    if round_no:
        assert len({round(v, 9) for v in values}) > 250, "delays must be jittered"


def test_breaker_opens_after_threshold_then_half_opens_one_probe_per_cooldown():
    clock = FakeClock()
    b = CircuitBreaker(threshold=3, cooldown_s=5.0)
    for _ in range(2):
        b.record_failure(clock())
        assert b.state(clock()) == CLOSED and b.allow(clock())
    b.record_failure(clock())
    assert b.state(clock()) == OPEN and not b.allow(clock())
    clock.advance(4.9)
    assert not b.allow(clock())
    clock.advance(0.2)
    assert b.state(clock()) == HALF_OPEN
    assert b.allow(clock()), "one probe goes through"
    assert not b.allow(clock()), "a second caller waits for the probe's outcome"
    b.record_failure(clock())
    assert b.state(clock()) == OPEN
    clock.advance(5.0)
    assert b.allow(clock())
    b.record_success()
    assert b.state(clock()) == CLOSED and b.failures == 0


def test_breaker_success_resets_the_count():
    b = CircuitBreaker(threshold=2, cooldown_s=1.0)
    b.record_failure(0)
    b.record_success()
    b.record_failure(0)
    assert b.state(0) == CLOSED


@pytest.mark.parametrize("given, urls", [
    ("http://a:1", ["http://a:1"]),
    ("http://a:1/, http://b:2", ["http://a:1", "http://b:2"]),
    (["http://a:1", "b:2", "http://a:1"], ["http://a:1", "http://b:2"]),
])
def test_parse_urls(given, urls):
    assert parse_urls(given) == urls


def test_parse_urls_needs_one():
    with pytest.raises(ValueError):
        parse_urls(" , ")


def test_plan_fails_over_in_order_and_sticks_to_the_url_that_answered():
    clock = FakeClock()
    t = Transport(["http://a", "http://b", "http://c"], RetryPolicy(failure_threshold=2), clock, random.Random(1))
    plan = t.plan(idempotent=True)
    first = plan.next()
    assert first.url == "http://a" and first.delay_s == 0
    plan.failed(first, "refused", sent=False)
    second = plan.next()
    assert second.url == "http://b" and second.delay_s == 0, "the next URL is tried at once"
    assert plan.answered(second, 200, None)
    assert t.order() == ["http://b", "http://c", "http://a"]


def test_plan_rounds_wait_with_backoff_then_give_up():
    t = Transport(["http://a", "http://b"], RetryPolicy(rounds=3, failure_threshold=100), FakeClock(),
                  random.Random(3))
    plan = t.plan(idempotent=True)
    delays = []
    while (attempt := plan.next()) is not None:
        delays.append((attempt.url, attempt.round_no, attempt.delay_s))
        plan.failed(attempt, "refused", sent=False)
    assert [(u, r) for u, r, _ in delays] == [("http://a", 0), ("http://b", 0), ("http://a", 1), ("http://b", 1),
                                              ("http://a", 2), ("http://b", 2)]
    waits = [d for _, _, d in delays]
    assert waits[0] == waits[1] == waits[3] == waits[5] == 0
    assert 0.05 <= waits[2] <= 0.1 and 0.1 <= waits[4] <= 0.2
    err = plan.unreachable()
    assert isinstance(err, Unreachable) and len(err.errors) == 6


def test_plan_fails_fast_when_every_breaker_is_open():
    clock = FakeClock()
    t = Transport(["http://a"], RetryPolicy(failure_threshold=1, cooldown_s=5), clock)
    plan = t.plan(True)
    plan.failed(plan.next(), "refused", sent=False)
    assert plan.next() is None
    fresh = t.plan(True)
    assert fresh.next() is None
    err = fresh.unreachable()
    assert "circuits are open" in str(err) and err.retry_after == pytest.approx(5.0)
    clock.advance(5)
    assert t.plan(True).next().url == "http://a", "half-open after the cool-down"


@pytest.mark.parametrize("idempotent, sent, retried", [
    (True, False, True), (True, True, True), (False, False, True), (False, True, False)])
def test_plan_retries_a_post_only_when_it_was_never_sent(idempotent, sent, retried):
    t = Transport(["http://a", "http://b"], RetryPolicy(), FakeClock())
    plan = t.plan(idempotent)
    plan.failed(plan.next(), "boom", sent=sent)
    assert (plan.next() is not None) == retried


@pytest.mark.parametrize("status, idempotent, final, answer", [
    (200, True, (), True), (404, True, (), True), (400, False, (), True),
    (500, True, (), False), (502, True, (), False), (500, False, (), True),
    (503, True, (503,), True)])
def test_plan_answered(status, idempotent, final, answer):
    t = Transport(["http://a", "http://b"], RetryPolicy(), FakeClock())
    plan = t.plan(idempotent)
    assert plan.answered(plan.next(), status, "resp", final) is answer
    assert (t.breakers["http://a"].failures == 1) == (status >= 500 and status not in final)


def test_cache_expiry_is_jittered_around_the_base():
    cache = LookupCache(ttl_s=5.0, jitter=0.2, clock=FakeClock(), rng=random.Random(11))
    lifetimes = [cache.lifetime_s() for _ in range(2000)]
    assert min(lifetimes) >= 4.0 and max(lifetimes) <= 6.0
    assert statistics.pstdev(lifetimes) > 0.4, "spread over the window, not bunched"
    assert abs(statistics.mean(lifetimes) - 5.0) < 0.1


def test_cache_fresh_stale_pinned():
    clock = FakeClock()
    cache = LookupCache(ttl_s=5.0, jitter=0.2, clock=clock)
    assert cache.put("k", {"v": 1}) is True
    assert cache.fresh("k") == {"v": 1}
    clock.advance(6.01)
    assert cache.fresh("k") is None and cache.last("k").value == {"v": 1}
    assert cache.put("k", {"v": 2}, pinned=True) is False
    clock.advance(1000)
    assert cache.fresh("k") == {"v": 2}, "a watched entry stays fresh"
    cache.unpin("k")
    assert cache.fresh("k") is None
    cache.put("k", {"v": 3})
    cache.expire()
    assert cache.fresh("k") is None and cache.last("k").value == {"v": 3}


def _answer(index: int, body: dict | None = None) -> httpx.Response:
    return httpx.Response(200, json=body or {"i": index}, headers={"X-Semreg-Index": str(index)})


def test_watch_state_yields_first_then_changes_and_rereads_when_the_index_goes_back():
    w = WatchState(wait_s=30)
    assert w.params() == {}
    assert w.update(_answer(10)) == {"i": 10}
    assert w.params() == {"index": "10", "wait": "30s"}
    assert w.update(_answer(10)) is None, "the wait ended without a change"
    assert w.update(_answer(12)) == {"i": 12}
    assert w.update(_answer(3)) is None and w.params() == {}, "went backwards: read again at once"
    assert w.update(_answer(3)) == {"i": 3}
    with pytest.raises(SemregClientError):
        w.update(httpx.Response(200, json={}))


def test_error_from_maps_statuses():
    e = error_from(httpx.Response(400, json={"error": "s is required."}))
    assert type(e) is ApiError and e.status == 400 and e.message == "s is required."
    assert isinstance(error_from(httpx.Response(404, json={"error": "no."})), NotFound)
    busy = error_from(httpx.Response(503, json={"error": "none."}, headers={"Retry-After": "2"}), "/v1/route")
    assert isinstance(busy, NoInstanceAvailable) and busy.retry_after == 2
    assert error_from(httpx.Response(502, text="Bad gateway")).message == "Bad gateway"


# == the client over a mock transport (no network, no sleeping) =====================================
class Mock:
    """An httpx mock: per-host behaviour, every request recorded."""

    def __init__(self, behaviour: dict[str, Callable[[httpx.Request], httpx.Response]]) -> None:
        self.behaviour = behaviour
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.behaviour[request.url.host](request)

    @property
    def hosts(self) -> list[str]:
        return [r.url.host for r in self.requests]


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def ok(body: object = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(200, json=body if body is not None else [],
                                          headers={"X-Semreg-Index": "5"})


def mock_client(mock: Mock, urls: str = "http://a:1,http://b:2", **kw) -> tuple[Client, FakeClock, list[float]]:
    clock = FakeClock()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    client = Client(urls, http_transport=httpx.MockTransport(mock), clock=clock, sleep=sleep,
                    rng=random.Random(5), **kw)
    return client, clock, sleeps


def test_client_fails_over_and_the_breaker_skips_the_dead_url():
    mock = Mock({"a": refuse, "b": ok()})
    client, clock, sleeps = mock_client(mock, retry=RetryPolicy(failure_threshold=1, cooldown_s=10))
    assert client.instances() == []
    assert mock.hosts == ["a", "b"] and sleeps == []
    client.transport.preferred = "http://a:1"  # even when asked to start with it again...
    assert client.instances() == []
    assert mock.hosts == ["a", "b", "b"], "...the open breaker skips the dead URL"
    clock.advance(10)
    mock.behaviour["b"] = refuse
    mock.behaviour["a"] = ok()
    assert client.instances() == []
    assert mock.hosts[3:] == ["b", "a"], "after the cool-down the dead URL gets a half-open probe"
    assert client.transport.state("http://a:1") == CLOSED and client.transport.preferred == "http://a:1"


def test_client_backs_off_with_the_injected_sleep_then_raises_unreachable():
    mock = Mock({"a": refuse})
    client, _, sleeps = mock_client(mock, "http://a:1")
    with pytest.raises(Unreachable) as err:
        client.tags()
    assert mock.hosts == ["a", "a", "a"]
    assert len(sleeps) == 2 and 0.05 <= sleeps[0] <= 0.1 and 0.1 <= sleeps[1] <= 0.2
    assert "Connection refused" in str(err.value) or "connection refused" in str(err.value)
    with pytest.raises(Unreachable, match="circuits are open"):
        client.tags()
    assert len(mock.requests) == 3, "an open breaker fails fast, without a request"


def test_client_never_retries_a_4xx():
    mock = Mock({"a": lambda r: httpx.Response(400, json={"error": "s is required."}), "b": ok()})
    client, _, _ = mock_client(mock)
    with pytest.raises(ApiError) as err:
        client.discover("ex:Obra")
    assert err.value.status == 400 and err.value.message == "s is required." and mock.hosts == ["a"]


def test_client_retries_5xx_elsewhere_and_reports_the_last_server_error():
    mock = Mock({"a": lambda r: httpx.Response(500, json={"error": "store failed."}), "b": ok({"tags": []})})
    client, _, _ = mock_client(mock)
    assert client.tags() == {"tags": []} and mock.hosts == ["a", "b"]
    mock.behaviour["b"] = mock.behaviour["a"]
    client2, _, sleeps = mock_client(mock, retry=RetryPolicy(rounds=2, failure_threshold=99))
    mock.requests.clear()
    with pytest.raises(ApiError) as err:
        client2.tags()
    assert err.value.status == 500 and err.value.message == "store failed."
    assert mock.hosts == ["a", "b", "a", "b"] and len(sleeps) == 1


def test_client_does_not_resend_a_post_that_may_have_arrived():
    def timeout(request):
        raise httpx.ReadTimeout("no answer", request=request)

    mock = Mock({"a": timeout, "b": ok({"id": "x"})})
    client, _, _ = mock_client(mock)
    with pytest.raises(Unreachable):
        client._call(_one(Call("POST", "/v1/instances", json={})))
    assert mock.hosts == ["a"]
    mock.behaviour["a"] = refuse
    mock.requests.clear()
    client.transport.breakers["http://a:1"].record_success()
    assert client._call(_one(Call("POST", "/v1/instances"))).json() == {"id": "x"}
    assert mock.hosts == ["a", "b"], "never sent: safe to send elsewhere"


def _one(call: Call):
    response = yield call
    return response


def test_route_503_is_an_answer_not_a_failure():
    mock = Mock({"a": lambda r: httpx.Response(503, json={"error": "no instance is eligible."},
                                               headers={"Retry-After": "2"}), "b": ok()})
    client, _, _ = mock_client(mock)
    with pytest.raises(NoInstanceAvailable) as err:
        client.route("ex:Obra")
    assert err.value.retry_after == 2 and err.value.status == 503 and mock.hosts == ["a"]
    assert client.transport.breakers["http://a:1"].failures == 0


def test_bearer_token_and_query_parameters():
    mock = Mock({"a": ok({"query": {}, "matches": [], "instances": []})})
    client, _, _ = mock_client(mock, "http://a:1", token="s3cret")
    client.discover("ex:Obra", match=["exact", "broader"], limit=3)
    request = mock.requests[0]
    assert request.headers["authorization"] == "Bearer s3cret"
    assert dict(request.url.params) == {"s": "ex:Obra", "match": "exact,broader", "limit": "3"}


def test_the_clients_environment_goes_with_every_call_unless_a_call_names_another():
    answers = {"/v1/instances": [], "/v1/tags": {"tags": []}, "/v1/discover/tags": {"peers": {}},
               "/v1/discover": {"query": {}, "matches": [], "instances": []}}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/route":
            return httpx.Response(307, headers={"Location": "http://10.0.0.1:80/x", "X-Semreg-Instance": "i"})
        if request.method == "PUT":
            return httpx.Response(201, json=json.loads(request.content))
        return ok(answers[request.url.path])(request)

    mock = Mock({"a": answer})
    client, _, _ = mock_client(mock, "http://a:1", environment="staging", cache_ttl_s=0)
    client.discover("ex:Obra", meta={"zone": "eu"})
    client.route("ex:Obra", meta={"zone": "eu", "tier": "gold"})
    client.instances(environment="*")
    client.tags()
    client.discover_tags(["ex:Obra"], meta={"zone": "eu"})
    watch = client.watch("ex:Obra", environment="prod")
    next(watch)
    watch.close()
    assert client.put_instance("i", {"service": "s", "address": "h", "port": 1})["environment"] == "staging"
    assert client.put_instance("j", {"service": "s", "address": "h", "port": 1, "environment": "dev"}
                               )["environment"] == "dev"
    params = [(r.url.path, {k: v for k, v in r.url.params.items() if k in ("environment", "meta.zone", "meta.tier")})
              for r in mock.requests if r.method != "PUT"]
    assert params == [("/v1/discover", {"environment": "staging", "meta.zone": "eu"}),
                      ("/v1/route", {"environment": "staging", "meta.zone": "eu", "meta.tier": "gold"}),
                      ("/v1/instances", {"environment": "*"}), ("/v1/tags", {"environment": "staging"}),
                      ("/v1/discover/tags", {"environment": "staging", "meta.zone": "eu"}),
                      ("/v1/discover", {"environment": "prod"})]
    plain, _, _ = mock_client(mock, "http://a:1")
    mock.requests.clear()
    plain.tags()
    assert "environment" not in mock.requests[0].url.params  # the registry's default


def test_discover_cache_is_fresh_then_refreshed_then_served_stale():
    body = {"query": {}, "matches": [], "instances": [{"id": "i1"}]}
    mock = Mock({"a": ok(body)})
    client, clock, _ = mock_client(mock, "http://a:1", cache_ttl_s=5.0)
    assert client.discover("ex:Obra") == body
    assert client.discover("ex:Obra") == body and len(mock.requests) == 1, "served from the cache"
    assert client.discover("ex:Filme") == body and len(mock.requests) == 2, "another query is another entry"
    clock.advance(6.01)
    client.discover("ex:Obra")
    assert len(mock.requests) == 3, "expired after 5 s ± 20 %"
    clock.advance(6.01)
    mock.behaviour["a"] = refuse
    stale = client.discover("ex:Obra")
    assert stale == {**body, "stale": True}
    with pytest.raises(Unreachable):
        client.discover("ex:Pintura")


# == against a real server ==========================================================================
PROCESS_FIXTURES = {"srv"}  # a real server (tests/conftest.py marks the tests that use it `process`)

@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """One on-disk server with the obras ontology, shared by the tests that do not stop it."""
    base = tmp_path_factory.mktemp("client-server")
    server = ServerProcess(base / "data", "--ontology", str(OBRAS)).start(base / "logs")
    yield server
    server.stop()


@pytest.fixture
def client(srv):
    with Client(srv.url, cache_ttl_s=0) as c:
        yield c


def livro_tag(genre: str = "Terror") -> str:
    return f"ex:Livro ex:temUmGenero ex:{genre}"


def test_register_context_manager_renews_and_deregisters(client):
    iid = uid("livros")
    with client.register(iid, service="livros", address="127.0.0.1", port=9001, tags=[livro_tag()],
                         ttl=1.2) as reg:
        assert reg.alive and reg.instance["id"] == iid and reg.interval_s == pytest.approx(0.4)
        seen = [client.instance(iid)["expires_at"]]
        for _ in range(3):  # renewal after renewal: heartbeats keep coming, every ttl/3
            wait_for(lambda: client.instance(iid)["expires_at"] > seen[-1], what="a heartbeat renewal")
            seen.append(client.instance(iid)["expires_at"])
        wait_for(lambda: reg.instance["expires_at"] > seen[0], what="the handle's view to follow")
        assert client.instance(iid)["status"] == "up"
    assert not reg.alive
    with pytest.raises(NotFound):
        client.instance(iid)
    reg.close()  # idempotent


def test_register_reports_load_and_ttl_zero_needs_no_heartbeat(client):
    iid = uid("load")
    with client.register(iid, service="load", address="127.0.0.1", port=9002, ttl=0.9, load=lambda: 7) as reg:
        wait_for(lambda: client.instance(iid)["load"] == 7, what="the load report")
        assert reg.alive
    forever = uid("forever")
    with client.register(forever, service="forever", address="127.0.0.1", port=9003, ttl=0) as reg:
        assert reg.interval_s is None and reg._thread is None
        assert client.instance(forever)["expires_at"] is None
    with pytest.raises(NotFound):
        client.instance(forever)


def test_register_sends_2000_tags_in_one_request(client):
    iid = uid("many")
    tags = [f"ex:Livro ex:temUmGenero <http://example.org/genres#g{n}>" for n in range(2000)]
    sent: list[httpx.Request] = []
    client.http.event_hooks["request"].append(sent.append)
    with client.register(iid, service="many", address="127.0.0.1", port=9004, tags=tags, ttl=30) as reg:
        assert [r.method for r in sent] == ["PUT"]
        assert len(reg.instance["tags"]) == 2000
        found = client.discover("ex:Obra", "ex:temUmGenero", "<http://example.org/genres#g1999>")
        assert [v["id"] for v in found["instances"]] == [iid]
        peers = client.discover_tags([tags[0], tags[1999]])["peers"]
        assert len(peers) == 2 and all([v["id"] for v in views] == [iid] for views in peers.values())


def test_unknown_terms_are_python_warnings(client):
    iid = uid("typo")
    with pytest.warns(UnknownTermWarning, match=r"^tags\[0\]: ex:Livr .* did you mean ex:Livro\?$"), \
            client.register(iid, service="typo", address="127.0.0.1", port=9005, tags=["ex:Livr"], ttl=0):
        with pytest.warns(UnknownTermWarning, match=r"^s: ex:Obar .* did you mean ex:Obra\?$"):
            assert client.discover("ex:Obar")["warnings"][0]["suggestions"] == [EX + "Obra"]
        with pytest.warns(UnknownTermWarning, match="ex:Obar"), pytest.raises(NoInstanceAvailable):
            client.route("ex:Obar")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.discover("ex:Obra")  # known terms: no warning


def test_register_rejected_raises_the_servers_sentence(client):
    with pytest.raises(ApiError) as err:
        client.register(uid("bad"), service="bad", address="127.0.0.1", port=70000)
    assert err.value.status == 400 and "port" in err.value.message


def test_discover_route_and_watch(client, srv):
    service = uid("filmes")
    q = ("ex:Obra", "ex:temUmGenero", "ex:Terror")
    with client.register(uid("f"), service=service, address="127.0.0.1", port=9101,
                         tags=["ex:Filme ex:temUmGenero ex:Terror"], ttl=30) as reg:
        found = client.discover(*q, service=service)
        assert found["query"] == {"s": EX + "Obra", "p": EX + "temUmGenero", "o": EX + "Terror"}
        assert [m["degree"] for m in found["matches"]] == ["narrower"]
        assert [v["id"] for v in found["instances"]] == [reg.id]
        url = client.route(*q, service=service, path="/films")
        assert isinstance(url, RouteURL) and url == "http://127.0.0.1:9101/films"
        assert url.instance_id == reg.id and not url.stale
        watch = client.watch(*q, service=service, wait_s=10)
        assert [v["id"] for v in next(watch)["instances"]] == [reg.id]
        second = uid("f")
        timer = threading.Timer(0.3, lambda: client.register(second, service=service, address="127.0.0.1",
                                                             port=9102, tags=[livro_tag()], ttl=0))
        timer.start()
        changed = next_within(watch, 15)
        timer.join()
        watch.close()
        assert sorted(v["id"] for v in changed["instances"]) == sorted([reg.id, second])
        client.deregister(second)


def test_a_client_in_an_environment_registers_and_finds_there_only(srv):
    q = ("ex:Obra", "ex:temUmGenero", "ex:Terror")
    service = uid("staged")
    with Client(srv.url, cache_ttl_s=0, environment="staging") as staging, Client(srv.url, cache_ttl_s=0) as plain, \
            staging.register(uid("s"), service=service, address="127.0.0.1", port=9201, meta={"zone": "eu"},
                             tags=["ex:Filme ex:temUmGenero ex:Terror"], ttl=30) as reg:
        assert reg.instance["environment"] == "staging"
        assert [v["id"] for v in staging.discover(*q, service=service)["instances"]] == [reg.id]
        assert plain.discover(*q, service=service)["instances"] == []
        assert [v["id"] for v in plain.discover(*q, service=service, environment="*")["instances"]] == [reg.id]
        assert staging.discover(*q, service=service, meta={"zone": "us"})["instances"] == []
        assert staging.route(*q, service=service, meta={"zone": "eu"}).instance_id == reg.id
        with pytest.raises(NoInstanceAvailable):
            plain.route(*q, service=service)
        assert [v["id"] for v in staging.instances(service=service)] == [reg.id]
        assert plain.instances(service=service) == []


def test_watch_yields_only_changed_results_over_a_long_poll_that_timed_out():
    """The server ends a long poll with the same index when nothing relevant happened; the client asks
    again with that index and yields nothing until the index moves."""
    answers = iter([_answer(10, {"instances": []}), _answer(10, {"instances": []}),
                    _answer(11, {"instances": [{"id": "p"}]})])
    mock = Mock({"a": lambda request: next(answers)})
    client, _, _ = mock_client(mock, "http://a:1")
    watch = client.watch("ex:Pintura", service="quiet", wait_s=1.5)
    assert next(watch) == {"instances": []}
    assert next(watch) == {"instances": [{"id": "p"}]}
    asked = [dict(r.url.params) for r in mock.requests]
    assert "index" not in asked[0] and asked[1]["index"] == asked[2]["index"] == "10" and asked[1]["wait"] == "1.5s"


def test_route_with_nothing_eligible_raises_no_instance_available(client):
    with pytest.raises(NoInstanceAvailable) as err:
        client.route("ex:Pintura", service=uid("nobody"))
    assert err.value.status == 503 and err.value.retry_after and err.value.retry_after >= 1
    assert err.value.message


def test_reads_tags_expand_concept_and_prefixes(client):
    service = uid("romances")
    with client.register(uid("r"), service=service, address="127.0.0.1", port=9201, tags=["ex:Romance"], ttl=0):
        tags = client.tags()["tags"]
        assert {"s": EX + "Romance", "p": "https://w3id.org/semreg#Any", "o": "https://w3id.org/semreg#Any"} in \
            [{k: t[k] for k in ("s", "p", "o")} for t in tags]
        assert [i["service"] for i in client.instances(service=service)] == [service]
    expanded = client.expand("ex:Obra", match="exact,narrower")
    assert {c["iri"] for c in expanded["components"]["s"]} >= {EX + "Obra", EX + "Livro", EX + "Romance"}
    concept = client.concept(EX + "Livro")
    assert concept["parents"] == [EX + "Obra"] and concept == client.concept("ex:Livro")
    assert client.prefixes()["ex"] == EX
    client.put_prefix("gen", "http://example.org/genres#")
    assert client.prefixes()["gen"] == "http://example.org/genres#"
    with pytest.raises(NotFound):
        client.concept("ex:NoSuchThing")


def test_ontology_upload_from_a_path_with_progress_get_list_delete(client, tmp_path):
    path = tmp_path / "musica.ttl"
    lines = ["@prefix mu: <http://example.org/musica#> .", "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> ."]
    lines += [f"mu:Genre{n} rdfs:subClassOf mu:Musica ." for n in range(3000)]
    path.write_text("\n".join(lines) + "\n")
    seen: list[tuple[int, int]] = []
    result = client.put_ontology("musica", path, progress=lambda sent, total: seen.append((sent, total)))
    assert result["name"] == "musica" and result["triples"] == 3000
    assert len(seen) > 1 and seen[-1] == (path.stat().st_size, path.stat().st_size)
    assert "musica" in [o["name"] for o in client.ontologies()]
    assert "Genre2999" in client.get_ontology("musica")
    assert json.loads(client.get_ontology("musica", accept="application/ld+json"))
    assert client.discover("mu:Musica")["query"]["s"] == "http://example.org/musica#Musica"
    client.delete_ontology("musica")
    with pytest.raises(NotFound):
        client.delete_ontology("musica")
    with pytest.raises(ApiError) as err:
        client.put_ontology("broken", "this is not turtle .")
    assert err.value.status == 400


def test_sparql_select_and_ask(client):
    with client.register(uid("sq"), service="sparqled", address="127.0.0.1", port=9301, tags=["ex:Pintura"], ttl=0):
        rows = client.sparql("PREFIX sr: <https://w3id.org/semreg#> "
                             "SELECT ?id WHERE { ?i a sr:Instance ; sr:service 'sparqled' ; sr:id ?id }")
        assert rows["head"]["vars"] == ["id"] and len(rows["results"]["bindings"]) == 1
    ask = client.sparql("ASK { ?s ?p ?o }")
    assert ask["boolean"] is True
    csv = client.sparql("SELECT ?x WHERE { VALUES ?x { 1 2 } }", accept="text/csv")
    assert isinstance(csv, str) and csv.splitlines()[0].strip() == "x"
    with pytest.raises(ApiError) as err:
        client.sparql("SELEKT nothing")
    assert err.value.status == 400


def test_first_url_dead_succeeds_via_the_second_and_the_breaker_skips_it(srv):
    dead = f"http://127.0.0.1:{free_port()}"
    with Client([dead, srv.url], retry=RetryPolicy(failure_threshold=1, cooldown_s=60), cache_ttl_s=0) as c:
        hosts: list[str] = []
        c.http.event_hooks["request"].append(lambda r: hosts.append(f"{r.url.scheme}://{r.url.netloc.decode()}"))
        assert isinstance(c.tags()["tags"], list)
        assert hosts == [dead, srv.url] and c.transport.state(dead) == "open"
        c.transport.preferred = dead
        c.ontologies()
        assert hosts[2:] == [srv.url], "the dead URL is skipped while its circuit is open"


def test_unreachable_when_every_url_is_dead():
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    with Client(urls, retry=RetryPolicy(rounds=2, backoff_base_s=0.01)) as c, pytest.raises(Unreachable) as err:
        c.instances()
    assert len(err.value.errors) == 4 and {u for u, _ in err.value.errors} == set(urls)


@pytest.mark.process
def test_stale_cache_when_the_server_is_stopped(start_server):
    server = start_server("--ontology", str(OBRAS))
    clock = FakeClock()
    c = Client(server.url, cache_ttl_s=5.0, clock=clock, retry=RetryPolicy(backoff_base_s=0.01))
    try:
        with c.register("stale-1", service="livros", address="127.0.0.1", port=9401, tags=[livro_tag()], ttl=0):
            fresh = c.discover("ex:Obra")
            url = c.route("ex:Obra")
            assert "stale" not in fresh and [v["id"] for v in fresh["instances"]] == ["stale-1"]
            reg_closed = server.stop()
            assert reg_closed is not None
            assert c.discover("ex:Obra") == fresh, "still fresh: no request needed"
            clock.advance(10)
            stale = c.discover("ex:Obra")
            assert stale["stale"] is True and stale["instances"] == fresh["instances"]
            again = c.route("ex:Obra")
            assert again.stale and again == url and again.instance_id == "stale-1"
            with pytest.raises(Unreachable):
                c.discover("ex:Pintura")
    finally:
        c.close()


@pytest.mark.process
def test_reregisters_after_a_memory_store_restart(start_server):
    server = start_server(data_dir=None)
    c = Client(server.url, retry=RetryPolicy(cooldown_s=0.5, backoff_base_s=0.02), cache_ttl_s=0)
    try:
        with c.register("phoenix", service="phoenix", address="127.0.0.1", port=9501, tags=["<http://x.org/o#A>"],
                        ttl=1.5) as reg:
            port = server.port
            server.stop()
            wait_for(lambda: not reg.alive, what="the heartbeat failure to show")
            start_server(data_dir=None, port=port)
            wait_for(lambda: reg.reregistrations >= 1 and reg.alive, timeout_s=20, what="re-registration")
            assert c.instance("phoenix")["tags"] == [{"s": "http://x.org/o#A", "p": "https://w3id.org/semreg#Any",
                                                     "o": "https://w3id.org/semreg#Any"}]
        with pytest.raises(NotFound):
            c.instance("phoenix")
    finally:
        c.close()


def test_watch_cache_keeps_a_cached_result_current(srv):
    service = uid("watched")
    with Client(srv.url, cache_ttl_s=3600, watch_cache=True, watch_wait_s=5) as watcher, \
            Client(srv.url, cache_ttl_s=0) as writer:
        assert watcher.discover("ex:Obra", service=service)["instances"] == []
        sent: list[httpx.Request] = []
        watcher.http.event_hooks["request"].append(sent.append)
        with writer.register(uid("w"), service=service, address="127.0.0.1", port=9601, tags=["ex:Filme"], ttl=0):
            wait_for(lambda: len(watcher.discover("ex:Obra", service=service)["instances"]) == 1,
                     what="the background watch to refresh the cache")
        assert all(r.url.params.get("index") for r in sent), "only the watch went to the server"


@pytest.mark.process
def test_token_is_sent_and_a_refusal_is_an_api_error(start_server, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "admin", "token": "t-admin-0123456789ab", "scopes": ["admin"]}]}))
    server = start_server("--tokens", str(tokens))
    with Client(server.url, token="t-admin-0123456789ab") as admin, Client(server.url) as anonymous:
        assert admin.instances() == []
        with pytest.raises(ApiError) as err:
            anonymous.instances()
        assert err.value.status == 401 and err.value.message


# == AsyncClient =====================================================================================
def test_async_register_discover_route_watch(srv):
    async def main() -> None:
        service = uid("async")
        async with AsyncClient(srv.url, cache_ttl_s=0) as c:
            async with c.register(uid("a"), service=service, address="127.0.0.1", port=9701,
                                  tags=[livro_tag()], ttl=0.9, load=_async_load) as reg:
                assert reg.alive and reg.interval_s == pytest.approx(0.3)
                first = (await c.instance(reg.id))["expires_at"]
                for _ in range(100):
                    view = await c.instance(reg.id)
                    if view["expires_at"] > first and view["load"] == 3:
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("no heartbeat renewed the async registration")
                found = await c.discover("ex:Obra", "ex:temUmGenero", "ex:Terror", service=service)
                assert [v["id"] for v in found["instances"]] == [reg.id]
                url = await c.route("ex:Obra", service=service, path="/x")
                assert url == "http://127.0.0.1:9701/x" and url.instance_id == reg.id
                watch = c.watch("ex:Obra", service=service, wait_s=10)
                assert len((await watch.__anext__())["instances"]) == 1
                other = uid("b")

                async def later() -> None:
                    await asyncio.sleep(0.3)
                    await c.put_instance(other, {"service": service, "address": "127.0.0.1", "port": 9702,
                                                 "tags": ["ex:Filme"], "ttl": 0})

                task = asyncio.create_task(later())
                changed = await asyncio.wait_for(watch.__anext__(), 15)
                await task
                await watch.aclose()
                assert len(changed["instances"]) == 2
                await c.deregister(other)
            assert not reg.alive
            with pytest.raises(NotFound):
                await c.instance(reg.id)
            with pytest.raises(NoInstanceAvailable):
                await c.route("ex:Obra", service=service)

    asyncio.run(main())


async def _async_load() -> int:
    return 3


def test_async_watch_cache_and_streamed_upload(srv, tmp_path):
    path = tmp_path / "async.ttl"
    path.write_text("@prefix as: <http://example.org/async#> .\n"
                    "as:B <http://www.w3.org/2000/01/rdf-schema#subClassOf> as:A .\n")

    async def main() -> None:
        service = uid("awatched")
        async with AsyncClient(srv.url, cache_ttl_s=3600, watch_cache=True, watch_wait_s=5) as watcher, \
                AsyncClient(srv.url) as writer:
            seen: list[tuple[int, int]] = []
            uploaded = await writer.put_ontology("async", path, progress=lambda sent, total: seen.append((sent, total)))
            assert uploaded["triples"] == 1 and seen[-1] == (path.stat().st_size,) * 2
            assert (await watcher.discover("as:A", service=service))["instances"] == []
            async with writer.register(uid("aw"), service=service, address="127.0.0.1", port=9650, tags=["as:B"],
                                       ttl=0):
                for _ in range(300):
                    if len((await watcher.discover("as:A", service=service))["instances"]) == 1:
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("the background watch did not refresh the async cache")
            await writer.delete_ontology("async")
        assert all(task.done() for task in watcher._watchers.values()) and not watcher._watchers

    asyncio.run(main())


@pytest.mark.process
def test_async_failover_breaker_and_stale_cache(start_server):
    server = start_server("--ontology", str(OBRAS))
    dead = f"http://127.0.0.1:{free_port()}"

    async def main() -> None:
        clock = FakeClock()
        policy = RetryPolicy(failure_threshold=1, cooldown_s=60, backoff_base_s=0.01)
        async with AsyncClient([dead, server.url], clock=clock, retry=policy) as c:
            hosts: list[str] = []

            async def hook(request: httpx.Request) -> None:
                hosts.append(f"{request.url.scheme}://{request.url.netloc.decode()}")

            c.http.event_hooks["request"].append(hook)
            reg = await c.register("async-stale", service="s", address="127.0.0.1", port=9801, tags=["ex:Livro"],
                                   ttl=0)
            assert hosts == [dead, server.url] and c.transport.state(dead) == "open"
            fresh = await c.discover("ex:Obra")
            assert [v["id"] for v in fresh["instances"]] == ["async-stale"] and hosts[-1] == server.url
            await asyncio.to_thread(server.stop)
            clock.advance(10)
            stale = await c.discover("ex:Obra")
            assert stale["stale"] is True and stale["instances"] == fresh["instances"]
            await reg.close()  # the registry is gone: logged, kept, not raised
            assert isinstance(reg.last_error, Unreachable)

    asyncio.run(main())


@pytest.mark.process
def test_async_reregisters_after_a_memory_store_restart(start_server):
    server = start_server(data_dir=None)

    async def main() -> None:
        policy = RetryPolicy(cooldown_s=0.5, backoff_base_s=0.02)
        async with AsyncClient(server.url, retry=policy) as c, \
                c.register("async-phoenix", service="p", address="127.0.0.1", port=9901, ttl=1.2) as reg:
            port = server.port
            await asyncio.to_thread(server.stop)
            await asyncio.to_thread(start_server, data_dir=None, port=port)
            for _ in range(400):
                if reg.reregistrations and reg.alive:
                    break
                await asyncio.sleep(0.05)
            assert reg.reregistrations >= 1 and reg.alive
            assert (await c.instance("async-phoenix"))["service"] == "p"

    asyncio.run(main())


def test_clients_share_one_set_of_operations():
    shared = ["discover", "route", "instances", "instance", "deregister", "heartbeat", "tags", "discover_tags",
              "expand", "concept", "put_ontology", "get_ontology", "ontologies", "delete_ontology", "prefixes",
              "put_prefix", "sparql", "put_instance"]
    for name in shared:
        assert getattr(Client, name) is getattr(AsyncClient, name), name


def test_an_ontology_file_of_a_suffix_no_rdf_format_has_is_refused_before_any_request():
    """The media type is guessed from the suffix: `notes.txt` names none, so the upload stops with the client's
    own sentence, before reaching for the server (which here does not exist) or the file (nor does it)."""
    with pytest.raises(SemregClientError) as refused:
        Client("http://127.0.0.1:1").put_ontology("x", Path("notes.txt"))
    assert type(refused.value) is SemregClientError  # neither Unreachable nor an ApiError: nothing was sent
    assert str(refused.value).startswith("cannot tell the RDF format of 'notes.txt' from its suffix; pass "
                                         "content_type (one of application/ld+json, ")
    with Client("http://127.0.0.1:1") as c, pytest.raises(Unreachable):  # the same upload, its type given, is sent
        c.put_ontology("x", b"<urn:a> <urn:b> <urn:c> .", content_type="text/turtle")


def watches_held(srv) -> int:
    text = httpx.get(srv.url + "/metrics", timeout=5).text
    return int(float(next(line.split()[1] for line in text.splitlines() if line.startswith("semreg_watches "))))


@pytest.mark.timeout(120)
def test_close_interrupts_a_cache_watch_in_a_long_poll(srv):
    """A client closed while its background watch waits in a long poll of five minutes (the server's longest) lets
    go without waiting it out: `close` returns, and the watch's thread is gone."""
    held = watches_held(srv)
    c = Client(srv.url, cache_ttl_s=3600, watch_cache=True, watch_wait_s=300)
    c.discover("ex:Obra", service=uid("closing"))
    wait_for(lambda: watches_held(srv) > held, what="the watch's long poll held by the server")
    c.close()
    assert not any(t.name == "semreg-cache-watch" and t.is_alive() for t in threading.enumerate())
