"""The noisy-neighbour scenarios: does a node keep its picture of who is alive while one client loops the
heaviest requests it can send?

    noisy-neighbour       one node of its own
    noisy-neighbour-ring  a ring of three members (k=2) with etcd; the heartbeats, probes and reads spread
                          over the members, the adversary on the first (the one serving SPARQL)

The liveness load: 3,000 instances with a 10 s ttl heartbeating every 3 s (1,000 a second, `Heartbeater`),
`/healthz` every 10 ms on a connection of its own per member, and 300 blocking reads re-armed after each
answer over 30 questions of three kinds (`GET /v1/discover?s=`, `GET /v1/instances?service=`, `GET
/v1/queries/{name}/discover`). Every half second the bench registers or removes the changing instance of
one of 20 of those questions, so each read of those must wake once per write to its question (latency from
the write's acknowledgement); the reads of the other 10 must never wake.

The adversary (`semreg.bench.aio.adversary`, in a child process) loops, back to back, on four lanes: the
64-pattern `all,similar` discovery with a new floor and new terms each time, and the saved-query put of that
body; a large ontology's upload (DBpedia's from --shared-data, else a generated one of 20,000 classes), a
restore and a backup; a batch of 10,000 instances of its own, then their removal one by one; five SPARQL
queries at once that would run past the time limit (a cross product of the registry graph).

The restore: the bench registers 100,000 instances of its own on the measured node first and takes their
backup, before anything else is registered; the adversary restores that backup with `force=true`, which
replaces the instances of the same ids and removes nothing else, so the heartbeating instances, the reads'
instances and the discovery's 800 instances survive every restore. The measured node therefore holds
those 100,000 instances in every phase (each on one of ten terms no question asks about), and the backup
the adversary takes is of them too.

Phases: `reference` (the liveness load alone, 20 s), `adversary` (--adversary-s, 60 s) and `after` (10 s,
the node catching up). The heartbeats go over as many connections as instances, as a fleet's would; a
heartbeat's latency is from when it was due and from when it left the bench. The bench's own schedule is
measured apart: how late each heartbeat left (its lateness at the sender: every connection waiting for the
server, or the bench's loop behind) and how late the bench's event loop woke its timers (its loop lag, which
says which of the two it was). A lease lost is an instance the server counted critical (sampled from
/metrics), or whose heartbeat left after the lease its previous answer gave had ended, or not `up` at the end.
A wake is timed from its write's acknowledgement and from its sending: the server may wake a read before
it acknowledges the write (it acknowledges once the write is durable). Both scenarios run only when named;
they start their own servers (no --semreg-url). Targets are the issue's, on the adversary phase; nothing
is asserted.

    noisy_load.py     what is registered and asked (pure)
    noisy_phases.py   the run: the load and probes, the three phases, the figures
    noisy_figures.py  the figures from the rows recorded (pure)
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from semreg.bench.aio import adversary as adv
from semreg.bench.context import BenchContext, expect
from semreg.bench.dataset import Dataset
from semreg.bench.localcluster import LocalCluster
from semreg.bench.peers import BenchError
from semreg.bench.report import Target
from semreg.bench.scenarios import noisy_figures as nf
from semreg.bench.scenarios.common import mib, register_batches, scenario
from semreg.bench.scenarios.noisy_load import (
    BATCH,
    NS,
    QUICK_LOAD,
    Member,
    NoisyLoad,
    group_term,
    restore_instances,
    watch_instance,
)
from semreg.bench.scenarios.noisy_phases import run
from semreg.bench.scenarios.registration import DBPEDIA
from semreg.bench.scenarios.scale_ring import member_options
from semreg.bench.scenarios.storage import download
from semreg.bench.scenarios.watches import open_files_for

TARGETS = (Target("heartbeat p99", "adversary.heartbeat_from_due.p99_ms", "<=", 20.0, "ms"),
           Target("heartbeat max", "adversary.heartbeat_from_due.max_ms", "<=", 200.0, "ms"),
           Target("/healthz max", "adversary.healthz.max_ms", "<=", 200.0, "ms"),
           Target("leases lost", "leases_lost", "<=", 0),
           Target("expected wake p99 from the write's ack", "adversary.wakes.p99_ms", "<=", 100.0, "ms"),
           Target("expected wake p99 from the write's sending", "adversary.wakes_from_write.p99_ms", "<=", 100.0, "ms"),
           Target("wrong wakes", "wrong_wakes", "<=", 0),
           Target("5xx but 503", "adversary_failures", "<=", 0))


@scenario("noisy-neighbour", "3,000 instances heartbeating (1,000/s), 300 blocking reads and /healthz every 10 ms on "
          "one node, without and with an adversary looping the heaviest request of each kind (--adversary-s)",
          targets=TARGETS, render=nf.render)
def noisy_neighbour(ctx: BenchContext) -> dict:
    load = setup(ctx)
    with ctx.own_semreg() as url:
        return run(ctx, load, [Member("node", url, ctx.semreg_pid(url))], prepare(ctx, [url], load))


@scenario("noisy-neighbour-ring", "noisy-neighbour through a ring of three members (k=2): the liveness load spread "
          "over the members, the adversary on the first; also members whose lease lapsed and ring changes",
          needs=("etcd",), targets=(*TARGETS, Target("members lapsed", "members_lapsed", "<=", 0)),
          render=nf.render)
def noisy_neighbour_ring(ctx: BenchContext) -> dict:
    load = setup(ctx)
    cluster = LocalCluster(ctx.peers.workdir / "noisy-ring", replicas=2, lease_s=10, name="noisy")
    try:
        with ctx.ui.step("starting etcd and 3 semreg members (k=2)"):
            cluster.start(0)
            nodes = [cluster.add(*member_options(ctx, k)) for k in range(3)]
        return run(ctx, load, [Member(n.name, n.url, n.pid) for n in nodes], prepare(ctx, [n.url for n in nodes], load))
    finally:
        with ctx.ui.step("stopping the ring"):
            cluster.close()


def setup(ctx: BenchContext) -> NoisyLoad:
    if ctx.external:
        raise BenchError("the noisy-neighbour scenarios restore into the server and read its processes; run them "
                         "without --semreg-url")
    load = QUICK_LOAD if ctx.settings.quick else NoisyLoad()
    open_files_for(load.heartbeat_connections + load.watches + 64)  # before the servers start: they inherit it
    return load



def large_ontology(ctx: BenchContext, load: NoisyLoad) -> tuple[Path, str]:
    """DBpedia's ontology from --shared-data, or a generated one of `generated_classes` classes: its path, and
    what it is."""
    shared = ctx.settings.shared_data / DBPEDIA
    if shared.is_file() and not ctx.settings.quick:
        return shared, DBPEDIA
    path = ctx.peers.workdir / "noisy-ontology.ttl"
    path.write_text(Dataset(classes=load.generated_classes, properties=20, instances=1, answer_size=1).turtle())
    return path, f"generated, {load.generated_classes:,} classes"


def prepare(ctx: BenchContext, urls: list[str], load: NoisyLoad) -> dict[str, Any]:
    """Everything but the heartbeating instances, through the first of `urls` (every member's background
    writes waited for): the figures of the preparation."""
    url = urls[0]
    started = time.perf_counter()
    backup = ctx.peers.workdir / "noisy-backup.nq.gz"
    with ctx.client(url, timeout_s=900) as http:
        expect(http.put(f"/v1/prefixes/{adv.PREFIX}", json={"iri": NS}), 200, 201, 204)
        with ctx.ui.step(f"registering the restore's {load.restore_instances:,} instances"):
            register_batches(ctx, http, restore_instances(load.restore_instances), BATCH)
        settle(ctx, urls)
        with ctx.ui.step("taking their backup"):
            backup_s = download(ctx, url, backup)
        if backup_s is None:
            raise BenchError("the server offers no GET /v1/backup")
        ontology, what = large_ontology(ctx, load)
        with ctx.ui.step(f"uploading the large ontology ({what})"):
            upload_started = time.perf_counter()
            expect(http.put("/v1/ontologies/nn-large", content=ontology.read_bytes(),
                            headers={"Content-Type": "text/turtle"}), 200, 201)
            upload_s = time.perf_counter() - upload_started
        with ctx.ui.step(f"registering {load.noisy_instances} instances of unknown terms and the reads' questions"):
            register_batches(ctx, http, [adv.noisy_instance(i) for i in range(load.noisy_instances)])
            register_batches(ctx, http, [watch_instance(g) for g in range(load.groups)])
            for g in range(2, load.groups, 3):
                expect(http.put(f"/v1/queries/nn-watch-{g:03d}", json={"s": group_term(g)}), 200, 201)
    settle(ctx, urls)
    return {"prepare_s": round(time.perf_counter() - started, 1), "ontology": what, "ontology_path": str(ontology),
            "backup_path": str(backup), "backup_mib": mib(backup.stat().st_size), "backup_s": backup_s,
            "upload_alone_s": round(upload_s, 2)}



def settle(ctx: BenchContext, urls: list[str]) -> None:
    for url in urls:
        with ctx.client(url) as http:
            ctx.wait_settled(http, 1800)
