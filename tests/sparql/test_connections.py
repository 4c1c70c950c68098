"""`/sparql` connections served by the query processes themselves, against real servers.

`semreg serve` hands a connection whose first request is for `/sparql` to a query process. What a client
gets must not depend on it: the same answers as the server's own route (`--sparql-in-server`), byte for
byte; other routes on the same connection; read-your-writes; tokens, scopes and rate limits; metrics;
and a long query never holds up the connections that shared its process.
"""
from __future__ import annotations

import json
import os
import signal
import threading

import httpx
import pytest
from support.paths import ONTOLOGIES
from support.processes import stat, tree
from support.raw import Raw, get, load, post, q
from support.server import wait_for

pytestmark = pytest.mark.process

RUNAWAY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
JSON = "application/sparql-results+json"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """The same registry behind both ways of answering `/sparql`."""
    from support.server import ServerProcess

    base = tmp_path_factory.mktemp("connections")
    out = {}
    for name, extra in (("processes", ()), ("server", ("--sparql-in-server",))):
        node = ServerProcess(None, "--ontology", str(ONTOLOGIES / "obras.ttl"), "--sparql-time-limit", "3", *extra)
        node.start(base / name)
        load(node.url)
        out[name] = node
    yield out
    for node in out.values():
        node.stop()


BATTERY = [
    get(q("SELECT ?s WHERE { ?s ex:temUmGenero ?g } ORDER BY ?s LIMIT 5"), f"Accept: {JSON}"),
    get(q("SELECT ?s WHERE { ?s ?p ?o } ORDER BY ?s LIMIT 3"), "Accept: text/csv"),
    get(q("SELECT ?s WHERE { ?s ?p ?o } ORDER BY ?s LIMIT 3"), "Accept: application/sparql-results+xml"),
    get(q("SELECT ?s WHERE { ?s ?p ?o } ORDER BY ?s LIMIT 3"), "Accept: text/tab-separated-values"),
    get(q("CONSTRUCT { ?s a ex:Obra } WHERE { ?s a ex:Livro } ORDER BY ?s LIMIT 2"), "Accept: text/turtle"),
    get(q("ASK { ?s ?p ?o }")),
    get(q("SELEC nothing")),
    get(q("SELECT * { SERVICE <http://x.org/> { ?s ?p ?o } }")),
    get(q("SELECT * { ?s ?p ?o } LIMIT 1"), "Accept: image/png"),
    get(q("SELECT * { ?s ?p ?o }") + "&default-graph-uri=not%20an%20iri"),
    get(q("SELECT (COUNT(*) AS ?n) { ?s ?p ?o }") + "&named-graph-uri=urn%3Asemreg%3Ainferred"),
    get(q("SELECT * { ?s ?p ?o }") + "&" + httpx.QueryParams({"query": "ASK {}"}).__str__()),
    get("/sparql?update=INSERT%20DATA%20%7B%7D"),
    get("/sparql?query=%FF"),
    get("/sparql", "Accept: text/turtle"),
    get("/sparql", "Accept: application/ld+json"),
    post("/sparql", b"query=ASK%20%7B%7D", "application/x-www-form-urlencoded"),
    post("/sparql", b"ASK { ?s a ex:Livro }", "application/sparql-query"),
    post("/sparql", b"ASK {}", "application/sparql-query; charset=latin-1"),
    post("/sparql", b"INSERT DATA {}", "application/sparql-update"),
    post("/sparql", b"<x/>", "application/xml"),
    post("/sparql", b"", None),
    # a body over the limit is refused on its Content-Length, before it is sent (so the refusal cannot
    # race the upload)
    post("/sparql", b"", "application/sparql-query").replace(b"Content-Length: 0", b"Content-Length: 2097152"),
    post(q("ASK {}").replace("query=", "default-graph-uri=urn%3Ax&query="), b"", None),
    # behind a proxy (loopback is trusted, as uvicorn trusts it): the scheme it names is the endpoint's
    get("/sparql", "Accept: text/turtle", "X-Forwarded-Proto: https", "X-Forwarded-For: 203.0.113.9"),
    get(q("SELECT ?i { BIND(IRI('x') AS ?i) }"), f"Accept: {JSON}", "X-Forwarded-Proto: https"),
    get(q("SELECT ?i { BIND(IRI('x') AS ?i) }"), f"Accept: {JSON}", "X-Forwarded-Proto: gopher"),
]
COMPARED = ("content-type", "vary", "retry-after", "www-authenticate")


@pytest.mark.parametrize("request_bytes", BATTERY, ids=lambda raw: raw.split(b"\r\n", 1)[0][:60].decode())
def test_answers_match_the_servers_own_route_byte_for_byte(servers, request_bytes):
    answers = []
    for name in ("processes", "server"):
        conn = Raw(servers[name].port)
        try:
            conn.send(request_bytes)
            head, body = conn.response()
        finally:
            conn.close()
        answers.append((head.status, {k: head.headers.get(k) for k in COMPARED}, body))
    assert answers[0] == answers[1]


def test_other_routes_and_sparql_share_one_connection_in_any_order(servers):
    node = servers["processes"]
    conn = Raw(node.port)
    try:
        conn.send(get(q("ASK { ?s ?p ?o }")))
        assert conn.response()[0].status == 200
        conn.send(get("/v1/discover?s=ex:Obra&p=ex:temUmGenero&o=sr:Any"))
        head, body = conn.response()
        assert head.status == 200 and len(json.loads(body)["instances"]) == 20
        conn.send(get("/healthz"))  # from now on uvicorn serves it, SPARQL included
        assert conn.response()[0].status == 200
        conn.send(get(q("ASK { ?s ?p ?o }")))
        assert json.loads(conn.response()[1])["boolean"] is True
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order_and_the_connection_moves_on(servers):
    conn = Raw(servers["processes"].port)
    try:
        conn.send(get(q("ASK { ?s ?p ?o }")) + get(q("ASK { ?s <urn:none> ?o }")) + get("/v1/instances?service=svc"))
        answers = [conn.response() for _ in range(3)]
        assert [json.loads(b)["boolean"] for _, b in answers[:2]] == [True, False]
        assert answers[2][0].status == 200 and len(json.loads(answers[2][1])) == 20
    finally:
        conn.close()


def test_a_body_announced_with_expect_continue_is_asked_for_then_answered(servers):
    conn = Raw(servers["processes"].port)
    try:
        body = b"ASK { ?s ?p ?o }"
        conn.send(post("/sparql", b"", "application/sparql-query", "Expect: 100-continue")
                  .replace(b"Content-Length: 0", b"Content-Length: %d" % len(body)))
        head, _ = conn.response()
        assert head.status == 100
        conn.send(body)
        head, answer = conn.response()
        assert head.status == 200 and json.loads(answer)["boolean"] is True
    finally:
        conn.close()


def test_a_chunked_body_is_read(servers):
    conn = Raw(servers["processes"].port)
    try:
        conn.send(b"POST /sparql HTTP/1.1\r\nHost: t\r\nContent-Type: application/sparql-query\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n6\r\nASK { \r\na\r\n?s ?p ?o }\r\n0\r\n\r\n")
        head, answer = conn.response()
        assert head.status == 200 and json.loads(answer)["boolean"] is True
    finally:
        conn.close()


@pytest.mark.parametrize("raw, status", [
    (b"GET /sparql HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
    (b"POST /sparql HTTP/1.1\r\nContent-Length: nine\r\n\r\n", 400),
    (b"POST /sparql HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 411),
])
def test_a_request_the_processes_cannot_frame_gets_its_4xx_and_the_connection_closes(servers, raw, status):
    conn = Raw(servers["processes"].port)
    try:
        conn.send(get(q("ASK {}")))
        assert conn.response()[0].status == 200  # handed over
        conn.send(raw)
        head, body = conn.response()
        assert head.status == status and "error" in json.loads(body) and not head.keep_alive
        assert conn.closed()
    finally:
        conn.close()


def test_http_1_0_and_connection_close_end_the_connection_after_the_answer(servers):
    for raw in (b"GET /sparql?query=ASK%7B%7D HTTP/1.0\r\n\r\n", get(q("ASK {}"), "Connection: close")):
        conn = Raw(servers["processes"].port)
        try:
            conn.send(raw)
            head, body = conn.response()
            assert head.status == 200 and json.loads(body)["boolean"] is True and not head.keep_alive
            assert conn.closed()
        finally:
            conn.close()


def test_a_write_acknowledged_is_visible_to_the_next_query_on_another_connection(servers):
    url = servers["processes"].url
    with httpx.Client(base_url=url, timeout=30) as writer, httpx.Client(base_url=url, timeout=30) as reader:
        reader.get("/sparql", params={"query": "ASK {}"})
        for k in range(60):
            tag = f"ex:Livro ex:temUmGenero ex:Fresh{k}"
            assert writer.put(f"/v1/instances/fresh-{k}", json={"service": "fresh", "address": "127.0.0.1",
                                                                "port": 9000, "ttl": 0, "tags": [tag]}).status_code in (200, 201)
            answer = reader.get("/sparql", params={"query": f"ASK {{ ?s ?p <http://example.org/obras#Fresh{k}> }}"})
            assert answer.json()["boolean"] is True, k
        assert writer.put("/v1/prefixes/fresh", json={"iri": "http://example.org/obras#"}).status_code in (200, 201)
        answer = reader.get("/sparql", params={"query": "ASK { ?s ?p fresh:Fresh0 }"})
        assert answer.status_code == 200 and answer.json()["boolean"] is True  # the new prefix, at once


def running(url: str) -> int:
    text = httpx.get(url + "/metrics").text
    return int(float(next(line for line in text.splitlines() if line.startswith("semreg_sparql_running ")).split()[1]))


def test_a_long_query_does_not_hold_up_the_connections_that_shared_its_process(start_server):
    node = start_server("--sparql-workers", "1", "--sparql-max-workers", "4", "--sparql-time-limit", "4",
                        "--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    load(node.url)
    conns = [Raw(node.port) for _ in range(4)]
    try:
        for conn in conns:  # all four with the one worker there is
            conn.send(get(q("ASK {}")))
            assert conn.response()[0].status == 200
        answered = threading.Event()
        runaway: list = []

        def send_runaway() -> None:
            conns[0].send(get(q(RUNAWAY)))
            runaway.append(conns[0].response())
            answered.set()

        thread = threading.Thread(target=send_runaway)
        thread.start()
        wait_for(lambda: running(node.url) == 1, 10, "the runaway running")
        for conn in conns[1:]:
            conn.send(get(q("ASK { ?s ?p ?o }")))
            head, body = conn.response()
            assert head.status == 200 and json.loads(body)["boolean"] is True
        assert not answered.is_set()  # all three answered while the runaway still ran
        thread.join(30)
        assert runaway[0][0].status == 503 and runaway[0][0].headers["retry-after"] == "4"
        assert "time limit of 4 s" in json.loads(runaway[0][1])["error"]
        for conn in conns[1:]:  # they go on being served
            conn.send(get(q("ASK {}")))
            assert conn.response()[0].status == 200
    finally:
        for conn in conns:
            conn.close()


def test_a_process_that_dies_mid_query_answers_503_and_another_takes_the_next(start_server):
    node = start_server("--sparql-time-limit", "30", "--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    load(node.url)
    results: list = []
    with httpx.Client(base_url=node.url, timeout=60) as http:
        thread = threading.Thread(target=lambda: results.append(http.get("/sparql", params={"query": RUNAWAY})))
        thread.start()
        wait_for(lambda: running(node.url) == 1, 10, "the runaway running")
        text = httpx.get(node.url + "/metrics").text
        assert "semreg_sparql_running 1.0" in text
        busy = [pid for pid in tree(node.proc.pid)[2:] if (stat(pid) or ["S"])[0] == "R"]
        assert busy, "the evaluating process"
        os.kill(busy[0], signal.SIGKILL)
        thread.join(30)
        assert results[0].status_code == 503 and "stopped while evaluating" in results[0].json()["error"]
    with httpx.Client(base_url=node.url, timeout=30) as http:
        assert http.get("/sparql", params={"query": "ASK {}"}).json()["boolean"] is True


TOKENS = {"tokens": [
    {"name": "reader", "token": "t-r-0123456789ab", "scopes": ["read"]},
    {"name": "bound", "token": "t-bound-0123456789ab", "scopes": ["read"], "environments": ["prod"]},
]}


def test_tokens_scopes_environments_and_rate_limits_hold_on_handed_over_connections(start_server, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    answers = {}
    for name, extra in (("processes", ()), ("server", ("--sparql-in-server",))):
        node = start_server("--tokens", str(path), "--rate-limit", "0.1", "--rate-burst", "3", *extra, data_dir=None)
        seen = []
        for token in (None, "nope", "t-bound-0123456789ab", *["t-r-0123456789ab"] * 4):
            conn = Raw(node.port)
            try:
                conn.send(get(q("ASK {}"), *([f"Authorization: Bearer {token}"] if token else [])))
                head, body = conn.response()
            finally:
                conn.close()
            seen.append((head.status, head.headers.get("www-authenticate"), json.loads(body).get("error", "")[:40]))
        answers[name] = seen
    assert [status for status, _, _ in answers["processes"]] == [401, 401, 403, 200, 200, 200, 429]
    assert answers["processes"] == answers["server"]


def test_a_token_added_on_sighup_opens_new_sparql_connections(start_server, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    node = start_server("--tokens", str(path), data_dir=None)
    late = {"Authorization": "Bearer t-late-0123456789ab"}
    assert httpx.get(node.url + "/sparql", params={"query": "ASK {}"}, headers=late).status_code == 401
    late_entry = {"name": "late", "token": "t-late-0123456789ab", "scopes": ["read"]}
    path.write_text(json.dumps({"tokens": [*TOKENS["tokens"], late_entry]}))
    os.kill(node.proc.pid, signal.SIGHUP)
    wait_for(lambda: httpx.get(node.url + "/sparql", params={"query": "ASK {}"}, headers=late).status_code == 200,
             10, "the new token known to the query processes")


def test_requests_the_processes_answer_are_counted_in_metrics(servers):
    url = servers["processes"].url

    def counted() -> float:
        text = httpx.get(url + "/metrics").text
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("semreg_http_requests_total{") and 'route="/sparql"' in line
                   and 'status="200"' in line)

    before = counted()
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(25):
            assert http.get("/sparql", params={"query": "ASK {}"}).status_code == 200
    wait_for(lambda: counted() >= before + 25, 10, "the 25 requests counted")


def test_sigterm_closes_handed_over_connections_and_leaves_no_process(start_server):
    node = start_server("--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    conn = Raw(node.port)
    conn.send(get(q("ASK {}")))
    assert conn.response()[0].status == 200
    processes = tree(node.proc.pid)
    os.kill(node.proc.pid, signal.SIGTERM)
    assert node.proc.wait(10) == 0
    assert conn.closed()
    conn.close()
    wait_for(lambda: all(stat(pid) is None or stat(pid)[0] == "Z" for pid in processes), 5, "no process left")
