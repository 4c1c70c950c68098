"""What the process tests of backup and restore share: the command line, writers that keep a registry busy
over HTTP while a backup runs, and what a client sees of a registry, to compare two of them."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from support.paths import ROOT
from support.ring import body

QUERIES = ROOT / "queries"
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
    from semreg.storage import backup

    with open(path, "rb") as f:
        return sorted(rec["id"] for rec, _ in backup.read(f).records)
