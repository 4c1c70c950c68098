"""The storage scenario: what the durable store costs, each part on fresh servers of its own.

    batch load  the synthetic ontology, then `--instances` instances in batches of `--batch-size`, on a
                fresh server; how long its background writes took to settle after
    start-up    `--storage-instances` instances of 3 tags on a second fresh server, in batches of 1,000,
                settled, stopped (SIGTERM) and started again on the same data directory three times: the
                seconds from the process's start to /readyz answering 200, and the directory's size at
                each stop (the first as registering left it)
    backup      GET /v1/backup of that server streamed to a file, and `semreg restore` of the file into a
                fresh empty server, when the server offers a backup (404 or 405: it does not)

It stops and restarts its servers, so it needs its own: with --semreg-url it fails with a BenchError.
No target: the figures are the baseline later changes to the store are weighed against.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import httpx

from semreg.bench.context import BenchContext, expect, patiently
from semreg.bench.dataset import Dataset
from semreg.bench.peers import BenchError, PeerProcess
from semreg.bench.scenarios.common import mib, scenario

TAGS = 3  # tags of each instance the restarted server holds
BATCH = 1000
RETRIES = 30  # times a batch answered 503 is sent again
STARTS = 3  # restarts timed on the same data directory
POLL_S = 0.02  # how often a starting server is asked /readyz
SETTLE_S = 900.0  # the longest a server may take to finish its background writes
STOP_S = 120.0  # the longest a server may take to stop after SIGTERM before it is killed
RESTORE_S = 1800.0
NOT_OFFERED = (404, 405)


@scenario("storage", "what the durable store costs, on fresh servers: a batch load, the start-up of a server "
          "on the data directory of --storage-instances instances (and its size), a backup and its restore "
          "when the server offers them")
def storage(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("storage stops and restarts servers of its own on their data directories; "
                         "run it without --semreg-url")
    servers: list[PeerProcess] = []  # every server this scenario started, stopped at its end
    try:
        figures = {"batch_load": batch_load(ctx, servers)}
        figures["startup"], source = start_up(ctx, servers)
        figures.update(backup_and_restore(ctx, servers, source, figures["startup"]["instances"]))
    finally:
        with ctx.ui.step("stopping the servers"):
            for server in servers:
                server.stop(STOP_S)
    return figures


def start(ctx: BenchContext, servers: list[PeerProcess], data: Path | None = None,
          extra: tuple[str, ...] = ()) -> tuple[PeerProcess, float]:
    """A semreg server on a new data directory, or on `data`: it, and the seconds from its start to /readyz 200."""
    started = time.perf_counter()
    peer = ctx.peers.semreg(*extra, data=data, poll_s=POLL_S)
    elapsed = time.perf_counter() - started
    servers.append(peer)
    return peer, round(elapsed, 3)


def batch_load(ctx: BenchContext, servers: list[PeerProcess]) -> dict:
    """The synthetic data set registered on a fresh server in batches, and the wait for its background writes."""
    with ctx.ui.step("starting a fresh semreg"):
        peer, _ = start(ctx, servers)
    uploaded = ctx.upload_ontology(peer.url)
    loaded = ctx.register_dataset(peer.url)
    with ctx.client(peer.url) as http:
        settled = ctx.wait_settled(http, SETTLE_S)
    peer.stop(STOP_S)  # the next server has the machine to itself
    return {"instances": ctx.dataset.instances, "tags_per_instance": ctx.dataset.tags_per_instance,
            "seconds": loaded["register_s"], "instances_per_s": loaded["instances_per_s"], "settled_s": settled,
            "ontology_upload_s": uploaded["ontology_upload_s"]}


def start_up(ctx: BenchContext, servers: list[PeerProcess]) -> tuple[dict, PeerProcess]:
    """`storage_instances` instances on a fresh server, then `STARTS` restarts on its data directory, each
    timed to /readyz 200 and checked to hold them all: the figures, and the server left running."""
    s = ctx.settings
    n = s.storage_instances
    data = Dataset(classes=s.classes, properties=s.properties, instances=n, tags_per_instance=TAGS,
                   answer_size=min(s.answer_size, n), seed=s.seed)
    with ctx.ui.step("starting a fresh semreg"):
        peer, empty_s = start(ctx, servers)
    ctx.upload_ontology(peer.url)
    with ctx.client(peer.url, timeout_s=300) as http:
        register_s = register(ctx, http, data).seconds
        settled = ctx.wait_settled(http, SETTLE_S)
        check_held(ctx, http, n, "after registering them")
    assert peer.data_dir is not None
    seconds: list[float] = []
    stops: list[float] = []
    sizes: list[int] = []  # at each stop: the first as registering left it, the next after a start read it
    for k in range(STARTS):
        with ctx.ui.step(f"stopping semreg (SIGTERM) and starting it on its data directory ({k + 1}/{STARTS})"):
            stops.append(stop(peer))
            sizes.append(tree_bytes(peer.data_dir))
            peer, took = start(ctx, servers, peer.data_dir)
        seconds.append(took)
        with ctx.client(peer.url) as http:
            check_held(ctx, http, n, f"after restart {k + 1}")
    return {"instances": n, "tags_per_instance": TAGS, "seconds": statistics.median(seconds), "seconds_all": seconds,
            "empty_seconds": empty_s, "stop_seconds": stops, "register_s": round(register_s, 3),
            "register_per_s": round(n / register_s, 1), "settled_s": settled, "data_dir_mib": mib(sizes[0]),
            "data_dir_bytes": sizes[0], "data_dir_mib_at_stops": [mib(size) for size in sizes]}, peer


class Registered(NamedTuple):
    seconds: float  # the requests' time, not their making
    retried: int  # batches sent again after a 503


def register(ctx: BenchContext, http: httpx.Client, data: Dataset) -> Registered:
    """`data`'s instances in batches of `BATCH`, as a client would: a batch answered 503 (a ring member whose
    lease lapsed on a loaded machine takes no writes until it is back) is sent again after its Retry-After,
    up to `RETRIES` times."""
    elapsed, retried = 0.0, 0
    with ctx.ui.step(f"registering {data.instances:,} instances × {data.tags_per_instance} tags in batches of "
                     f"{BATCH:,}", total=data.instances) as advance:
        for batch in data.batches(BATCH):
            def send(batch: list = batch) -> httpx.Response:
                nonlocal elapsed, retried
                started = time.perf_counter()
                response = http.post("/v1/instances/batch", json={"instances": batch})
                elapsed += time.perf_counter() - started
                retried += response.status_code == 503
                return response
            response = patiently(send, RETRIES + 1)
            retried -= response.status_code == 503  # the last answer is not a retry
            expect(response)
            advance(len(batch))
    return Registered(elapsed, retried)


def stop(peer: PeerProcess) -> float:
    """SIGTERM, waited for: the seconds it took; BenchError when the server had to be killed or failed."""
    started = time.perf_counter()
    peer.stop(STOP_S)
    elapsed = round(time.perf_counter() - started, 3)
    code = peer.proc.returncode if peer.proc is not None else None
    if code not in (0, None):
        raise BenchError(f"semreg exited with status {code} after SIGTERM ({elapsed} s):\n{peer.log_tail()}")
    return elapsed


def held(ctx: BenchContext, http: httpx.Client) -> int:
    """The instances a server holds, of every status (`semreg_instances{status=...}`)."""
    return int(sum(value for series, value in ctx.metrics(http).items() if series.startswith("semreg_instances{")))


def check_held(ctx: BenchContext, http: httpx.Client, n: int, when: str) -> None:
    got = held(ctx, http)
    if got != n:
        raise BenchError(f"the server held {got:,} instances {when}, not the {n:,} registered")


def tree_bytes(path: Path) -> int:
    """The sizes of the files under `path`, summed."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def backup_and_restore(ctx: BenchContext, servers: list[PeerProcess], source: PeerProcess, n: int) -> dict:
    """GET /v1/backup of `source` into a file and `semreg restore` of it into a fresh server, timed, when the
    server offers a backup; `{"backup": "not offered by this server"}` when it does not."""
    path = ctx.peers.workdir / "storage-backup"
    with ctx.ui.step("downloading GET /v1/backup"):
        backup_s = download(ctx, source.url, path)
    if backup_s is None:
        return {"backup": "not offered by this server"}
    size = path.stat().st_size
    with ctx.ui.step("starting a fresh semreg"):
        target, _ = start(ctx, servers)
    with ctx.ui.step(f"semreg restore of {mib(size)} MiB into it"):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "semreg", "restore", str(path), "--url", target.url],
                              capture_output=True, text=True, timeout=RESTORE_S, check=False)
        restore_s = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"semreg restore exited with status {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")
    with ctx.client(target.url) as http:
        check_held(ctx, http, n, "restored from the backup")
    return {"backup": {"seconds": backup_s, "bytes": size, "mib": mib(size)}, "restore": {"seconds": round(restore_s, 3)}}


def download(ctx: BenchContext, url: str, path: Path) -> float | None:
    """GET /v1/backup streamed into `path`: the seconds it took, or None when the server does not offer it."""
    with ctx.client(url, timeout_s=600) as http:
        started = time.perf_counter()
        with http.stream("GET", "/v1/backup") as response:
            if response.status_code in NOT_OFFERED:
                return None
            if not response.is_success:
                response.read()
                expect(response)
            with open(path, "wb") as out:
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
        return round(time.perf_counter() - started, 3)
