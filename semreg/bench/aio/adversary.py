"""The noisy neighbour: the heaviest request of each kind, looped back to back, in a process of its own.

It runs in a child process (`Adversary`), so the bench's own event loop, which keeps the heartbeats'
schedule, never competes with it for the GIL. Its work goes in lanes, each a keep-alive connection that
loops over its kinds, one request after another:

    discover-similar  POST /v1/discover: `patterns` patterns of terms no ontology knows, `match=all,similar`,
                      a new `min_similarity` and new terms each time, so nothing of it is ever cached (a new
                      floor alone is not enough: over 800 instances the first such question took 6.0 s and
                      each next one with the same terms and a new floor 3 ms; with new terms each took 3.5 s)
    query-put         PUT /v1/queries/{name} with that body
    upload            PUT /v1/ontologies/{name} of a large ontology, the same name each time (a replacement)
    backup            GET /v1/backup, read whole
    restore           POST /v1/restore?force=true of a prepared backup
    batch             POST /v1/instances/batch of `batch_instances` instances of its own, then `delete` of
                      each, one DELETE a request
    sparql            `sparql_at_once` queries that run past the time limit, sent at once over as many
                      connections

Every answer is classified (`classify`): 2xx; 400 naming a budget; 429; 503 with Retry-After; another
4xx; another 5xx (a failure); a transport error. A request still running when the adversary is told to
stop is cancelled and counted apart (`unfinished`).
"""
from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson

from semreg.bench.aio.connection import TRANSPORT_ERRORS, Connection, Response

NS = "http://bench.semreg.example/noisy#"
PREFIX = "ho"  # the prefix of the discovery's terms: the bench sets it on the server (PUT /v1/prefixes/ho)
OUTCOMES = ("2xx", "400-budget", "429", "503-retry-after", "other-4xx", "other-5xx", "transport")
KINDS = ("discover-similar", "query-put", "upload", "backup", "restore", "batch", "delete", "sparql")
# the batch's removals, one request each, take a lane's whole turn: a lane of their own, so the uploads,
# restores and backups each come round within a minute
DEFAULT_LANES = (("discover-similar", "query-put"), ("upload", "restore", "backup"), ("batch",), ("sparql",))
QUERY_NAMES = 4  # the saved queries the puts cycle over
# a cross product of the registry graph with itself, three times: past any time limit on any registry
RUNAWAY = ("SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <urn:semreg:registry> {{ ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }} }} "
           "LIMIT {limit}")
_BUDGET = re.compile(r"budget|--[a-z][a-z0-9-]+", re.IGNORECASE)


# -- what is sent (pure) ---------------------------------------------------------------------------------
def similar_patterns(n: int, turn: int = 0) -> list[dict[str, str]]:
    """The `turn`-th discovery's `n` patterns: `ho:Ask{k}Widget ho:rel{k} ho:Ask{k}Style` for the n values of k
    from turn·n on, none of them known, and none asked by an earlier turn."""
    return [{"s": f"{PREFIX}:Ask{k}Widget", "p": f"{PREFIX}:rel{k}", "o": f"{PREFIX}:Ask{k}Style"}
            for k in range(turn * n, turn * n + n)]


def similarity_floor(k: int) -> float:
    """The k-th request's `min_similarity`: 0.011, then a little higher each time, never the same twice."""
    return round(0.011 + k * 1e-7, 9)


def similar_body(k: int, patterns: int) -> bytes:
    return orjson.dumps({"all": similar_patterns(patterns, k), "match": "all,similar",
                         "min_similarity": similarity_floor(k)})


def noisy_instance(i: int) -> dict[str, Any]:
    """One of the instances the discovery scores: two tags whose terms no ontology knows."""
    tags = [f"{PREFIX}:Widget{j}Service {PREFIX}:hasGenre {PREFIX}:Genre{j}Style" for j in (2 * i, 2 * i + 1)]
    return {"id": f"nn-noisy-{i:05d}", "service": "nn-noisy", "address": "127.0.0.1", "port": 8000 + i % 1000,
            "ttl": 0, "tags": tags}


def batch_instances(n: int) -> list[dict[str, Any]]:
    """The batch's instances: the same ids each round (they are deleted between two), on a few terms of their own."""
    return [{"id": f"nn-batch-{i:05d}", "service": "nn-batch", "address": "127.0.0.1", "port": 9000 + i % 1000,
             "ttl": 0, "tags": [{"s": f"{NS}Batch{i % 10}"}]} for i in range(n)]


def runaway_target(k: int) -> str:
    return "/sparql?" + urlencode({"query": RUNAWAY.format(limit=k + 1)})


# -- what came back (pure) -------------------------------------------------------------------------------
def classify(status: int | None, headers: Mapping[str, str], body: bytes) -> str:
    """One of `OUTCOMES` for an answer (`status` None: a transport error). A 400 names a budget when its body
    says "budget", names a flag (`--...`) or carries a `budget` field; any other status under 500 that is not
    2xx, 400-budget or 429 is `other-4xx`."""
    if status is None:
        return "transport"
    if 200 <= status < 300:
        return "2xx"
    if status == 429:
        return "429"
    if status == 503 and "retry-after" in {name.lower() for name in headers}:
        return "503-retry-after"
    if status >= 500:
        return "other-5xx"
    if status == 400 and (_BUDGET.search(body[:2000].decode(errors="replace")) or _has_budget_field(body)):
        return "400-budget"
    return "other-4xx"


def _has_budget_field(body: bytes) -> bool:
    try:
        return isinstance(data := orjson.loads(body), dict) and "budget" in data
    except orjson.JSONDecodeError:
        return False


@dataclass(frozen=True)
class Outcome:
    kind: str
    outcome: str  # one of OUTCOMES
    started: float  # perf_counter (one clock for every process of the machine)
    seconds: float
    detail: str = ""  # the start of a non-2xx answer, or the transport error


# -- the plan, and the process that carries it out -----------------------------------------------------------
@dataclass(frozen=True)
class AdversaryPlan:
    url: str
    ontology: str  # path of the Turtle file uploaded
    backup: str  # path of the backup restored
    headers: dict[str, str] = field(default_factory=dict)
    lanes: tuple[tuple[str, ...], ...] = DEFAULT_LANES
    patterns: int = 64
    batch_instances: int = 10_000
    sparql_at_once: int = 5
    ontology_name: str = "nn-large"
    timeout_s: float = 600.0


class _Lanes:
    """The lanes of one plan on the child's event loop; `outcomes` fills as answers come."""

    def __init__(self, plan: AdversaryPlan) -> None:
        self.plan = plan
        self.outcomes: list[Outcome] = []
        self.unfinished: dict[str, int] = {}
        self.turn = 0  # counts every discovery and put, so each gets a new floor
        self.stopping = False
        self.ontology = Path(plan.ontology).read_bytes()
        self.backup = Path(plan.backup).read_bytes()
        self.batch = orjson.dumps({"instances": batch_instances(plan.batch_instances)})
        self.batch_ids = [item["id"] for item in batch_instances(plan.batch_instances)]

    async def send(self, conn: Connection, kind: str, method: str, target: str, body: bytes | None = None,
                   headers: Mapping[str, str] | None = None) -> Response | None:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.plan.timeout_s):  # not wait_for: on 3.11 it can swallow a cancel
                response = await conn.request(method, target, body, headers)
        except asyncio.CancelledError:
            self.unfinished[kind] = self.unfinished.get(kind, 0) + 1
            raise
        except (TimeoutError, *TRANSPORT_ERRORS) as exc:
            self.outcomes.append(Outcome(kind, "transport", started, time.perf_counter() - started,
                                         f"{type(exc).__name__}: {exc}"[:160]))
            return None
        outcome = classify(response.status, response.headers, response.body)
        detail = "" if outcome == "2xx" else f"{response.status}: {response.body[:140].decode(errors='replace')}"
        self.outcomes.append(Outcome(kind, outcome, started, time.perf_counter() - started, detail))
        # an answer already buffered is read without yielding: a turn for the rest, the stop's watch included
        await asyncio.sleep(0)
        return response

    def steps(self) -> dict[str, Callable[[Connection], Awaitable[None]]]:
        return {"discover-similar": self.discover, "query-put": self.query_put, "upload": self.upload,
                "backup": self.backup_step, "restore": self.restore, "batch": self.batch_step, "sparql": self.sparql}

    async def discover(self, conn: Connection) -> None:
        self.turn += 1
        await self.send(conn, "discover-similar", "POST", "/v1/discover", similar_body(self.turn, self.plan.patterns))

    async def query_put(self, conn: Connection) -> None:
        self.turn += 1
        await self.send(conn, "query-put", "PUT", f"/v1/queries/nn-adversary-{self.turn % QUERY_NAMES}",
                        similar_body(self.turn, self.plan.patterns))

    async def upload(self, conn: Connection) -> None:
        await self.send(conn, "upload", "PUT", f"/v1/ontologies/{self.plan.ontology_name}", self.ontology,
                        {"Content-Type": "text/turtle"})

    async def backup_step(self, conn: Connection) -> None:
        await self.send(conn, "backup", "GET", "/v1/backup")

    async def restore(self, conn: Connection) -> None:
        await self.send(conn, "restore", "POST", "/v1/restore?force=true", self.backup,
                        {"Content-Type": "application/gzip"})

    async def batch_step(self, conn: Connection) -> None:
        response = await self.send(conn, "batch", "POST", "/v1/instances/batch", self.batch)
        if response is not None and response.status // 100 == 2:
            for iid in self.batch_ids:
                if self.stopping:
                    return
                await self.send(conn, "delete", "DELETE", f"/v1/instances/{iid}")

    async def sparql(self, conn: Connection) -> None:
        extra = [Connection(self.plan.url, conn.headers) for _ in range(self.plan.sparql_at_once - 1)]
        try:
            self.turn += 1
            base = self.turn * self.plan.sparql_at_once
            await asyncio.gather(*(self.send(c, "sparql", "GET", runaway_target(base + n))
                                   for n, c in enumerate([conn, *extra])))
        finally:
            for c in extra:
                c.close()

    async def lane(self, kinds: tuple[str, ...]) -> None:
        steps = self.steps()
        conn = Connection(self.plan.url, {"Content-Type": "application/json", "Accept": "application/json",
                                          **self.plan.headers})
        try:
            n = 0
            while not self.stopping:
                await steps[kinds[n % len(kinds)]](conn)
                n += 1
        finally:
            conn.close()


async def _run(plan: AdversaryPlan, stop: Any) -> _Lanes:
    lanes = _Lanes(plan)
    tasks = [asyncio.get_running_loop().create_task(lanes.lane(kinds)) for kinds in plan.lanes]
    try:
        while not stop.is_set() and not all(t.done() for t in tasks):
            await asyncio.sleep(0.05)
    finally:
        lanes.stopping = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return lanes


def main(plan: AdversaryPlan, stop: Any, results: Any) -> None:
    """The child process: the lanes until `stop` is set, then (outcomes, unfinished, error) sent on `results`."""
    error = ""
    lanes = None
    try:
        lanes = asyncio.run(_run(plan, stop))
    except Exception as exc:  # said to the parent, which reports it
        error = f"{type(exc).__name__}: {exc}"
    results.send(([astuple(o) for o in lanes.outcomes] if lanes else [],
                  lanes.unfinished if lanes else {}, error))
    results.close()


class Adversary:
    """`main` in a child process: `start()`, then `stop()` for what it saw (outcomes, unfinished, error)."""

    def __init__(self, plan: AdversaryPlan) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(target=main, args=(plan, self._stop, send), name="semreg-bench-adversary",
                                        daemon=True)
        self._send = send

    def start(self) -> None:
        self._process.start()
        self._send.close()  # the child holds the sending end now

    def stop(self, timeout_s: float = 60.0) -> tuple[list[Outcome], dict[str, int], str]:
        self._stop.set()
        try:
            if not self._receive.poll(timeout_s):
                return [], {}, f"the adversary process sent nothing within {timeout_s:.0f} s of being stopped"
            raw, unfinished, error = self._receive.recv()
        except EOFError:
            return [], {}, f"the adversary process ended (status {self._process.exitcode}) without its outcomes"
        finally:
            self._process.join(10)
            if self._process.is_alive():
                with contextlib.suppress(Exception):
                    self._process.kill()
                    self._process.join(5)
        return [Outcome(*row) for row in raw], unfinished, error
