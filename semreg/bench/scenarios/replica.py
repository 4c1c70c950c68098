"""The no-sparql scenario: what the SPARQL replica costs a node, measured as what `--no-sparql` saves.

Two fresh servers in turn, each on a data directory with the synthetic ontology and `--instances` instances of
3 tags: one as started by default, one with `--no-sparql`. Each tree's PSS (server, SPARQL template, query
processes) is read with the ontology alone, then with the instances once their background writes settled and
the server gave freed memory back (the same wait as the scale scenario's). What the second saves, divided by
the instances, is what the replica costs a node per instance: on a ring, a member started with `--no-sparql`
saves it for every instance of the ring, not only those it owns.

It starts and stops its own servers: with --semreg-url it fails with a BenchError.
"""
from __future__ import annotations

import time
from typing import Any

from semreg.bench.context import BenchContext
from semreg.bench.peers import BenchError
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario
from semreg.bench.scenarios.scale import RELEASE_WAIT_S, tree_memory
from semreg.bench.scenarios.storage import POLL_S, SETTLE_S, check_held, register, stop

VARIANTS = (("sparql", ()), ("no_sparql", ("--no-sparql",)))


@scenario("no-sparql", "--instances instances of 3 tags on a fresh server started as by default and on one "
          "started with --no-sparql: the PSS of each process tree, and what the SPARQL replica costs an instance",
          targets=(Target("saved an instance", "saved_per_instance_kib", ">=", 4.0, "KiB"),))
def no_sparql(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("no-sparql measures the memory of servers of its own; run it without --semreg-url")
    n = ctx.dataset.instances
    figures: dict[str, Any] = {"instances": n, "tags_per_instance": ctx.dataset.tags_per_instance}
    for label, extra in VARIANTS:
        figures[label] = one_server(ctx, extra, n)
    saved = figures["sparql"]["memory"]["total_pss_mib"] - figures["no_sparql"]["memory"]["total_pss_mib"]
    figures["saved_mib"] = round(saved, 1)
    figures["saved_per_instance_kib"] = round(saved * 1024 / n, 2)
    for label, _ in VARIANTS:
        used = figures[label]["memory"]["total_pss_mib"] - figures[label]["memory_empty"]["total_pss_mib"]
        figures[label]["pss_per_instance_kib"] = round(used * 1024 / n, 2)
    ctx.ui.log(f"  {n:,} instances: {figures['sparql']['memory']['total_pss_mib']:,} MiB PSS with the replica, "
               f"{figures['no_sparql']['memory']['total_pss_mib']:,} MiB without; {figures['saved_per_instance_kib']} KiB "
               f"an instance saved")
    return figures


def one_server(ctx: BenchContext, extra: tuple[str, ...], n: int) -> dict[str, Any]:
    """A fresh server started with `extra`, loaded, measured and stopped."""
    with ctx.ui.step(f"starting a fresh semreg {' '.join(extra)}".rstrip()):
        peer = ctx.peers.semreg(*extra, poll_s=POLL_S)
    try:
        ctx.upload_ontology(peer.url)
        with ctx.client(peer.url, timeout_s=600) as http:
            empty = tree_memory(peer)
            register_s = register(ctx, http, ctx.dataset).seconds
            ctx.wait_settled(http, SETTLE_S * max(1, n // 100_000))
            check_held(ctx, http, n, "after registering them")
            wait_s = 0.0 if ctx.settings.quick else RELEASE_WAIT_S
            with ctx.ui.step(f"waiting {wait_s:.0f} s for the server to give freed memory back"):
                time.sleep(wait_s)
            full = tree_memory(peer)
    finally:
        stop(peer)
    return {"register_s": round(register_s, 1), "memory_empty": empty, "memory": full}
