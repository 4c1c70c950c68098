"""Compressed answers, as Consul's agent gives them to clients that ask (Go's transport always does): the same
JSON, compressed once while the answer stands, with `Vary: Accept-Encoding`; a client that does not ask, or
refuses gzip by weight, gets it as it is."""
from __future__ import annotations

import gzip

from hypothesis import given
from hypothesis import strategies as st

from semreg.consul.encoding import MIN_BYTES, accepts_gzip

READS = ["/v1/health/service/livros", "/v1/health/service/obras-de-terror", "/v1/catalog/service/livros",
         "/v1/catalog/services"]


def raw(srv, path: str, accept: str | None):
    """The response as sent, not unpacked (httpx would unpack a gzip body on reading it)."""
    headers = {"Accept-Encoding": accept if accept is not None else "identity"}

    async def fetch():
        r = await srv.consul_http.send(srv.consul_http.build_request("GET", path, headers=headers), stream=True)
        try:
            return r, b"".join([chunk async for chunk in r.aiter_raw()])
        finally:
            await r.aclose()
    return srv.run(fetch())


def test_a_client_asking_for_gzip_gets_the_same_answer_compressed(srv):
    for path in READS:
        plain, plain_bytes = raw(srv, path, None)
        packed, packed_bytes = raw(srv, path, "gzip")
        assert "content-encoding" not in plain.headers and plain.headers["vary"] == "Accept-Encoding"
        assert packed.headers["vary"] == "Accept-Encoding"
        if len(plain_bytes) >= MIN_BYTES:
            assert packed.headers["content-encoding"] == "gzip" and gzip.decompress(packed_bytes) == plain_bytes
        else:  # too short to gain from it
            assert "content-encoding" not in packed.headers and packed_bytes == plain_bytes
        assert int(packed.headers["content-length"]) == len(packed_bytes)
        assert len(packed_bytes) < len(plain_bytes) or len(plain_bytes) < MIN_BYTES
        assert packed.headers["x-consul-index"] == plain.headers["x-consul-index"]


def test_gzip_refused_by_weight_or_not_offered_is_not_sent(srv):
    for accept in ("gzip;q=0", "br, deflate", "*;q=0", "gzip;q=0, *", "identity"):
        r, _ = raw(srv, "/v1/health/service/livros", accept)
        assert "content-encoding" not in r.headers, accept
    for accept in ("GZIP", "x-gzip", "*", "br;q=1, gzip;q=0.1", "deflate, gzip ; q=0.5"):
        r, body = raw(srv, "/v1/health/service/livros", accept)
        assert r.headers["content-encoding"] == "gzip" and gzip.decompress(body).startswith(b"["), accept


def test_a_compressed_answer_follows_a_change(srv):
    c = srv.consul()
    _, before = raw(srv, "/v1/health/service/livros", "gzip")
    assert c.put("/v1/agent/check/fail/service:livro-1").status_code == 200
    _, after = raw(srv, "/v1/health/service/livros", "gzip")
    assert b'"critical"' in gzip.decompress(after) and b'"critical"' not in gzip.decompress(before)


@given(st.text(max_size=80))
def test_any_accept_encoding_header_reads_as_yes_or_no(header):
    assert accepts_gzip(header) in (True, False)


def test_weights_decide():
    assert accepts_gzip("gzip") and accepts_gzip("gzip;q=0.001") and accepts_gzip("*")
    assert not accepts_gzip(None) and not accepts_gzip("") and not accepts_gzip("gzip;q=0")
    assert not accepts_gzip("gzip;q=nonsense") and not accepts_gzip("gzip;q=0, *;q=1")
