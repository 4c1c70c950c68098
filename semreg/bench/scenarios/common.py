"""What a scenario is (`Scenario`, made by `@scenario`), and the steps several scenarios share:
registering instances in batches, removing them from an external server, waiting for a condition,
the 1,000 tags of a registration, and a few units and media types.

Every scenario module imports this one, and this one none of them: what two families (or the thesis's
tables and the registration scenario) share lives here, so their imports go one way.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from semreg.bench.aio.connection import Connection
from semreg.bench.aio.loop import LoopThread, gather_limited
from semreg.bench.context import BenchContext, expect, patiently
from semreg.bench.dataset import class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.report import Target

SPARQL_JSON = "application/sparql-results+json"
MiB = 1024 * 1024


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[BenchContext], dict]
    summary: str
    needs: tuple[str, ...] = ()  # tools besides semreg: "wrk", "etcd", "oxigraph"
    targets: tuple[Target, ...] = ()
    render: Callable[[dict], list[list[str]]] | None = None  # a table of its own (header row first)


def scenario(name: str, summary: str, *, needs: tuple[str, ...] = (), targets: tuple[Target, ...] = (),
             render: Callable[[dict], list[list[str]]] | None = None) -> Callable[[Callable[[BenchContext], dict]], Scenario]:
    """Make `fn(ctx) -> figures` the `Scenario` called `name` (listed in `SCENARIOS` to be run)."""
    def make(fn: Callable[[BenchContext], dict]) -> Scenario:
        return Scenario(name, fn, summary, needs, targets, render)
    return make


def register_batches(ctx: BenchContext, http, items: list[dict], size: int = 1000) -> None:
    """`items` in batches of `size`, each sent again after the Retry-After of a 503, as a client would."""
    for start in range(0, len(items), size):
        batch = items[start:start + size]
        expect(patiently(functools.partial(http.post, "/v1/instances/batch", json={"instances": batch})))
        ctx.registered_ids.update(item["id"] for item in batch)


def remove_instances(ctx: BenchContext, loop: LoopThread, base_url: str, ids: list[str]) -> None:
    """On an external server, delete what a scenario registered (16 connections); a fresh one is stopped anyway."""
    if not ctx.external or not ids:
        return
    headers = ctx.auth_headers(base_url)
    connections = [Connection(base_url, headers) for _ in range(16)]

    async def delete_all() -> None:
        async def worker(conn: Connection, mine: list[str]) -> None:
            for instance_id in mine:
                await conn.request("DELETE", f"/v1/instances/{instance_id}")
            conn.close()
        await gather_limited([worker(c, ids[n::len(connections)]) for n, c in enumerate(connections)], 16)

    with ctx.ui.step(f"removing {len(ids):,} instances"):
        loop.run(delete_all(), 300)
    ctx.registered_ids.difference_update(ids)


def thousand_tags(ctx: BenchContext, variant: int) -> list[dict]:
    """`register_tags` distinct tags over classes outside the discovery answer; a new object per variant."""
    classes = ctx.dataset.outside_classes()
    n_props, n_classes = ctx.dataset.properties, ctx.dataset.classes
    tags = [{"s": classes[k % len(classes)], "p": property_iri(k // len(classes) % n_props),
             "o": class_iri((k * 13 + variant * 101 + 1) % n_classes)} for k in range(ctx.settings.register_tags)]
    if len({(t["s"], t["p"], t["o"]) for t in tags}) != len(tags):
        raise BenchError(f"the ontology is too small for {len(tags)} distinct tags; raise --classes")
    return tags


def wait_for(condition: Callable[[], bool], timeout_s: float, every_s: float = 0.005) -> bool:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            return False
        time.sleep(every_s)
    return True


def mib(value: int | None) -> float | None:
    return round(value / MiB, 1) if value is not None else None
