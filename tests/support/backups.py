"""What the tests of backup and restore share: the command line, writers that keep a registry busy over HTTP
while a backup runs, what a client sees of a registry (to compare two of them), bodies that inflate far past
their size (`gzip_bomb`), and a registry that a refused restore must leave as it was (`holding_one`)."""
from __future__ import annotations

import contextlib
import os
import random
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from support.paths import ROOT
from support.ring import body

QUERIES = ROOT / "queries"
HEAD = b"# semreg backup 1, taken 2026-01-01T00:00:00Z\n"
TAG_LINE = (b"<urn:semreg:instance:x> <https://w3id.org/semreg#tag> _:b78t0 <urn:semreg:registry> .\n")  # a valid line
LIVE = ("expires_at", "load")  # a restored instance has a fresh lease and no load reported yet


def semreg(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """`python -m semreg ARGS`, its output captured (stderr not a terminal: no progress bars)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEMREG_")}
    return subprocess.run([sys.executable, "-m", "semreg", *args], capture_output=True, text=True, env=environ,
                          timeout=timeout_s, cwd=ROOT)


class Writers:
    """`n` threads registering, replacing and deleting instances through HTTP until stopped."""

    def __init__(self, url: str, n: int = 4) -> None:
        self.url = url
        self.stop_flag = threading.Event()
        self.writes = 0
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(k,), name=f"backup-writer-{k}") for k in range(n)]

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(30)

    def _run(self, k: int) -> None:
        rng = random.Random(k)
        with httpx.Client(base_url=self.url, timeout=30) as c:
            while not self.stop_flag.is_set():
                n = 1000 + k * 1000 + rng.randrange(60)
                iid = f"i{n:04d}"
                if rng.random() < 0.25:
                    r = c.delete(f"/v1/instances/{iid}")
                    ok = r.status_code in (204, 404)
                else:
                    r = c.put(f"/v1/instances/{iid}", json=body(n, service=f"w{rng.randrange(5)}"))
                    ok = r.status_code in (200, 201)
                if not ok:
                    self.errors.append(f"{r.status_code} {r.text[:200]}")
                self.writes += 1


def answers(c: httpx.Client) -> dict[str, Any]:
    """What a client sees: instances (without live fields), a discovery, tags, and the example queries."""
    instances = [{k: v for k, v in i.items() if k not in LIVE}
                 for i in c.get("/v1/instances", params={"environment": "*"}).json()]
    found = c.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror", "match": "all",
                                          "environment": "*"}).json()
    out = {"instances": instances, "tags": c.get("/v1/tags", params={"environment": "*"}).json(),
           "discover": [(i["id"], i["match"]["degree"], i["match"]["distance"]) for i in found["instances"]]}
    for query in sorted(QUERIES.glob("*.rq")):
        r = c.post("/sparql", content=query.read_text(), headers={"Content-Type": "application/sparql-query"})
        assert r.status_code == 200, (query.name, r.text)
        out[query.name] = sorted(map(repr, (_named(b) for b in r.json()["results"]["bindings"])))
    return out


def _named(binding: dict[str, Any]) -> dict[str, Any]:
    """A solution with its blank nodes unnamed (two stores label them differently)."""
    return {k: ("_:", None) if v.get("type") == "bnode" else (v.get("value"), v.get("datatype")) for k, v in binding.items()}


def backup_ids(path: Path) -> list[str]:
    from semreg.storage import backup_reading

    with open(path, "rb") as f, backup_reading.read(f) as contents:
        return sorted(rec["id"] for rec, _ in contents.records)


def gzip_bomb(line: bytes, inflated_bytes: int, head: bytes = HEAD) -> bytes:
    """One gzip member (as `gzip` writes it, CRC and size right) of `head` then `line` repeated to about
    `inflated_bytes`, made without compressing it all: a mebibyte of lines is compressed once, after a full
    flush, so that its deflate blocks can be repeated as they are."""
    block = line * max(1, (1 << 20) // len(line))
    copies = max(1, inflated_bytes // len(block))
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    middle = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    last = deflate.flush(zlib.Z_FINISH)
    crc = zlib.crc32(head)
    for _ in range(copies):
        crc = zlib.crc32(block, crc)
    size = len(head) + copies * len(block)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first + middle * copies + last
            + struct.pack("<II", crc, size & 0xFFFFFFFF))


@contextlib.contextmanager
def holding_one(**settings: Any) -> Iterator[Any]:
    """A client of an app in this process (with `settings`) that holds one instance, `kept`: a restore that is
    refused must leave it as it is."""
    from support.inprocess import InProcess

    server = InProcess(**settings).start()
    try:
        c = server.client()
        r = c.put("/v1/instances/kept", json={"service": "k", "address": "10.3.0.1", "port": 3, "ttl": 0})
        assert r.status_code == 201, r.text
        yield c
    finally:
        server.stop()
