"""The health probes against real local servers: framing, keep-alive reuse, failures."""
from __future__ import annotations

import asyncio

import pytest

from semreg.registry.probes import MAX_BODY_BYTES, HttpTcpProbe, http_target


class Target:
    """A local HTTP server answering with canned responses, counting connections."""

    def __init__(self, responses: list[bytes], close_after: bool = False):
        self.responses = responses
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                writer.write(self.responses[min(len(self.requests), len(self.responses)) - 1])
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CHUNKED = b"HTTP/1.1 204 No Content\r\n\r\n"


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("response, passing, detail", [
    (OK, True, "HTTP 200"),
    (b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n", True, "HTTP 302"),
    (b"HTTP/1.1 503 Unavailable\r\nContent-Length: 4\r\n\r\nbusy", False, "HTTP 503"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", True, "HTTP 200"),
    (CHUNKED, True, "HTTP 204"),
    (b"SSH-2.0-OpenSSH\r\n", False, "not HTTP"),
])
def test_http_statuses_and_framing(response, passing, detail):
    async def go():
        async with Target([response]) as t:
            probe = HttpTcpProbe()
            ok, text = await probe({"http": f"http://127.0.0.1:{t.port}/health?x=1", "timeout": 2})
            await probe.aclose()
            assert t.requests[0].startswith(b"GET /health?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
            return ok, text
    ok, text = run(go())
    assert ok is passing and detail in text


def test_connections_are_kept_alive_and_reused():
    async def go():
        async with Target([OK]) as t:
            probe = HttpTcpProbe()
            for _ in range(20):
                assert (await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2}))[0]
            await probe.aclose()
            return t.connections
    assert run(go()) == 1


def test_a_target_that_closes_each_connection_still_passes():
    async def go():
        async with Target([OK], close_after=True) as t:
            probe = HttpTcpProbe()
            results = [await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2}) for _ in range(5)]
            await probe.aclose()
            return results
    assert all(ok for ok, _ in run(go()))


def test_close_delimited_body_is_not_pooled():
    async def go():
        async with Target([b"HTTP/1.0 200 OK\r\n\r\nbody until close"], close_after=True) as t:
            probe = HttpTcpProbe()
            first = await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2})
            second = await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2})
            await probe.aclose()
            return first, second, t.connections
    first, second, connections = run(go())
    assert first[0] and second[0] and connections == 2


def test_unreachable_and_silent_targets_fail():
    async def go():
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        probe = HttpTcpProbe()
        slow = await probe({"http": f"http://127.0.0.1:{port}/", "timeout": 0.2})
        silent.close()
        closed_port = port
        await silent.wait_closed()
        refused = await probe({"http": f"http://127.0.0.1:{closed_port}/", "timeout": 1})
        tcp_refused = await probe({"tcp": f"127.0.0.1:{closed_port}", "timeout": 1})
        await probe.aclose()
        return slow, refused, tcp_refused
    slow, refused, tcp_refused = run(go())
    assert slow == (False, "no answer within 0.2 s")
    assert not refused[0] and not tcp_refused[0]


def test_tcp_probe_passes_on_accept():
    async def go():
        async with Target([OK]) as t:
            return await HttpTcpProbe()({"tcp": f"127.0.0.1:{t.port}", "timeout": 1})
    assert run(go()) == (True, "TCP connect ok")


def test_targets_parse_once():
    t = http_target("https://user@example.org:8443/a/b?c=d")
    assert (t.host, t.port, t.tls) == ("example.org", 8443, True)
    assert t.request.startswith(b"GET /a/b?c=d HTTP/1.1\r\nHost: example.org:8443\r\n")
    assert http_target("http://h").request.startswith(b"GET / HTTP/1.1\r\nHost: h\r\n")


@pytest.mark.parametrize("response, detail", [
    (b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "ResponseError: the status of"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n", "ResponseError: Content-Length 'lots' is not a number"),
    (b"HTTP/1.1 200 OK\r\nnot a header\r\n\r\n", "ResponseError: malformed header line"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "ResponseError: malformed chunk size"),
])
def test_malformed_responses_fail_with_what_was_wrong(response, detail):
    async def go():
        async with Target([response]) as t:
            probe = HttpTcpProbe()
            result = await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2})
            await probe.aclose()
            return result
    ok, text = run(go())
    assert not ok and text.startswith(detail)


@pytest.mark.parametrize("response, detail", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "middle of the response body"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "middle of the response body"),
    (b"HTTP/1.1 200 OK\r\nContent-", "middle of the response head"),
    (b"", "before a response arrived"),
])
def test_a_response_cut_off_by_the_target_fails(response, detail):
    """On a fresh connection there is nothing to retry: the probe fails with where the answer stopped."""
    async def go():
        async with Target([response], close_after=True) as t:
            probe = HttpTcpProbe()
            result = await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2})
            await probe.aclose()
            return result, t.connections
    (ok, text), connections = run(go())
    assert not ok and text.startswith("ClosedEarly: ") and detail in text
    assert connections == 1


def test_chunked_bodies_with_trailers_are_read_and_the_connection_kept():
    response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n"

    async def go():
        async with Target([response]) as t:
            probe = HttpTcpProbe()
            results = [await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2}) for _ in range(5)]
            await probe.aclose()
            return results, t.connections
    results, connections = run(go())
    assert results == [(True, "HTTP 200")] * 5 and connections == 1


@pytest.mark.parametrize("response", [
    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1) + b"x" * (MAX_BODY_BYTES + 1),
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % (MAX_BODY_BYTES + 1) + b"x" * (MAX_BODY_BYTES + 1)
    + b"\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
])
def test_large_bodies_and_closing_answers_pass_but_are_not_pooled(response):
    async def go():
        async with Target([response]) as t:
            probe = HttpTcpProbe()
            results = [await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2}) for _ in range(3)]
            await probe.aclose()
            return results, t.connections
    results, connections = run(go())
    assert results == [(True, "HTTP 200")] * 3 and connections == 3


def test_interim_responses_are_skipped():
    response = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def go():
        async with Target([response]) as t:
            probe = HttpTcpProbe()
            results = [await probe({"http": f"http://127.0.0.1:{t.port}/", "timeout": 2}) for _ in range(3)]
            await probe.aclose()
            return results, t.connections
    results, connections = run(go())
    assert results == [(True, "HTTP 200")] * 3 and connections == 1
