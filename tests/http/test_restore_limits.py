"""A restore reads its body as it streams (docs/how-to/backup-restore.md): past the limit on the inflated size or
on a line's length it is a 400 naming the limit (and the line), raised as the body passes it, in memory that
does not grow with the body; and a refused restore changes nothing."""
from __future__ import annotations

import gc
import gzip
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from support.backups import HEAD, TAG_LINE, gzip_bomb, holding_one
from support.raw import Raw

GZ = {"Content-Type": "application/gzip"}
MiB = 1 << 20
INFLATED_LIMIT = 64 * MiB
# a registration line with a long literal: few quads a mebibyte, so what a reader keeps is mostly the text
LONG_LINE = (b'<urn:semreg:instance:x> <https://w3id.org/semreg#service> "' + b"s" * (60 * 1024)
             + b'" <urn:semreg:registry> .\n')


@pytest.fixture(scope="module")
def target():
    """A node holding one instance, whose inflated limit is 64 MiB (the line limit its default, 16 MiB)."""
    with holding_one(restore_inflated_limit_bytes=INFLATED_LIMIT) as c:
        yield c


def traced_peak(run: Callable[[], Any]) -> tuple[Any, int]:
    """What `run` returns, and the most memory Python's allocator held meanwhile beyond what it held before
    (every thread's: the app's loop and its workers)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def refused_and_unchanged(target, body: bytes) -> dict[str, Any]:
    before = target.get("/v1/instances").json()
    r = target.post("/v1/restore", params={"force": "true"}, content=body, headers=GZ)
    assert r.status_code == 400, r.text
    assert target.get("/v1/instances").json() == before and [i["id"] for i in before] == ["kept"]
    return r.json()


@pytest.mark.parametrize("line", [TAG_LINE, LONG_LINE], ids=["a tag's line", "a long literal's line"])
def test_a_gzip_bomb_is_refused_at_the_inflated_limit_in_memory_that_does_not_grow_with_it(target, line):
    body = gzip_bomb(line, 1 << 30)  # 1 GiB of one valid registry line, in 3.7 MB (the tag's) or 1 MB
    assert len(body) < 4 * MiB
    said, peak = traced_peak(lambda: refused_and_unchanged(target, body))
    assert said["limit"] == "restore-inflated-limit" and said["limit_bytes"] == INFLATED_LIMIT
    assert "--restore-inflated-limit" in said["error"] and str(INFLATED_LIMIT) in said["error"]
    # it read 64 MiB before refusing; what it held meanwhile is a step of it, a line, one record
    assert peak < 16 * MiB, f"the restore held {peak / MiB:.1f} MiB while it read 64 MiB"


def test_a_body_of_newlines_is_refused_at_the_inflated_limit(target):
    body = gzip_bomb(b"\n", 1 << 30)
    assert len(body) < 2 * MiB
    said = refused_and_unchanged(target, body)
    assert said["limit"] == "restore-inflated-limit" and "--restore-inflated-limit" in said["error"]


def test_a_line_past_the_line_limit_is_refused_naming_it(target):
    long = b'<urn:semreg:instance:x> <https://w3id.org/semreg#service> "' + b"x" * (17 * MiB) + b'" <urn:semreg:registry> .\n'
    said = refused_and_unchanged(target, gzip.compress(HEAD + TAG_LINE + long + TAG_LINE, compresslevel=1))
    assert said["line"] == 3 and said["limit"] == "restore-line-limit" and said["limit_bytes"] == 16 * MiB
    assert "line 3 " in said["error"] and "--restore-line-limit" in said["error"]


def test_a_line_within_the_limit_but_past_what_the_rdf_parser_reads_is_a_400(in_process):
    server = in_process(restore_line_limit_bytes=32 * MiB)
    c = server.client()
    long = b'<urn:semreg:instance:x> <https://w3id.org/semreg#service> "' + b"x" * (17 * MiB) + b'" <urn:semreg:registry> .\n'
    r = c.post("/v1/restore", content=gzip.compress(HEAD + long, compresslevel=1), headers=GZ)
    assert r.status_code == 400 and r.json()["line"] == 2 and "longer than the RDF parser reads" in r.json()["error"]
    assert c.get("/v1/instances").json() == []


def test_a_body_that_ends_inside_its_gzip_data_or_trails_other_bytes_is_refused(target):
    whole = gzip.compress(HEAD + TAG_LINE)
    for body in (whole[:-3], whole + b"not gzip", whole + gzip.compress(TAG_LINE)[:5]):
        said = refused_and_unchanged(target, body)
        assert "ends early" in said["error"] or "damaged" in said["error"], said


def test_a_bomb_sent_over_a_socket_is_refused_before_its_body_ends(in_process):
    server = in_process(restore_inflated_limit_bytes=INFLATED_LIMIT)
    port = int(server.listen().rsplit(":", 1)[1])
    bomb = gzip_bomb(TAG_LINE, 1 << 30)
    first = bomb[:512 * 1024]  # inflates to more than the 64 MiB limit on its own
    raw = Raw(port)
    try:
        raw.send(b"POST /v1/restore HTTP/1.1\r\nHost: semreg.test\r\nContent-Type: application/gzip\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(first):x}\r\n".encode() + first + b"\r\n")
        head, body = raw.response()  # the rest of the body, and its last chunk, are never sent
    finally:
        raw.close()
    assert head.status == 400 and json.loads(body)["limit"] == "restore-inflated-limit", body[:300]
    assert server.client().get("/v1/instances").json() == []
