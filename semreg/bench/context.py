"""What a scenario gets: the settings, progress, lazily started peers, the data set, and wrk runs.

A scenario is `fn(ctx) -> dict of figures`. Peers start on first use and are shared by the
scenarios of a run (`ctx.semreg()`, `ctx.etcd()`, `ctx.oxigraph()`), except `ctx.own_semreg()`, a
server for one scenario alone. Against `--semreg-url` every semreg call goes to that server and what
the benchmark registered or uploaded there is removed at the end.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import httpx

from semreg.bench import wrk
from semreg.bench.dataset import Dataset
from semreg.bench.peers import BenchError, PeerProcess, Peers
from semreg.bench.settings import BenchSettings
from semreg.bench.ui import Steps

BENCH_ONTOLOGY = "bench"


@dataclass(frozen=True)
class Load:
    """One HTTP request wrk repeats: a label for the report, then what to send."""

    label: str
    url: str
    method: str = "GET"
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    script: str | None = None  # a wrk script that builds each request itself (`url` is then a sample)
    base: str | None = None  # with a script: the server's base URL wrk connects to


def expect(response: httpx.Response, *statuses: int) -> httpx.Response:
    """The response if its status is one of `statuses` (any 2xx when none given); BenchError otherwise."""
    ok = response.status_code in statuses if statuses else response.is_success
    if not ok:
        request = response.request
        raise BenchError(f"{request.method} {request.url.path} answered {response.status_code}: "
                         f"{response.text[:500]}")
    return response


def patiently(send: Callable[[], httpx.Response], tries: int = 10) -> httpx.Response:
    """`send()`'s response, sent again after the Retry-After of a 503 (a node shedding load, a ring member back
    after its lease lapsed), as a client would, at most `tries` times in all."""
    for _ in range(tries - 1):
        response = send()
        if response.status_code != 503:
            return response
        time.sleep(float(response.headers.get("Retry-After", "1")))
    return send()


def median_figures(runs: list[dict]) -> dict:
    """The median of every numeric figure over runs (a single run is returned as is)."""
    if len(runs) == 1:
        return dict(runs[0])
    merged = {}
    for key, value in runs[0].items():
        values = [run[key] for run in runs if run.get(key) is not None]
        merged[key] = statistics.median(values) if isinstance(value, (int, float)) and values else value
    merged["runs_requests_per_s"] = [run["requests_per_s"] for run in runs]
    return merged


class BenchContext:
    def __init__(self, settings: BenchSettings, ui: Steps, peers: Peers) -> None:
        self.settings = settings
        self.ui = ui
        self.peers = peers
        self._shared: dict[str, PeerProcess | BaseException] = {}
        self._ontology_figures: dict | None = None
        self._instances_figures: dict | None = None
        self.registered_ids: set[str] = set()  # on an external server: removed at the end
        self.uploaded_ontologies: set[str] = set()

    # -- peers ------------------------------------------------------------------------------------------
    def _peer(self, name: str, start) -> str:
        known = self._shared.get(name)
        if isinstance(known, BaseException):  # failed once: do not retry for every scenario
            raise BenchError(f"{name} could not be started earlier in this run: {known}")
        if known is None:
            with self.ui.step(f"starting {name}"):
                try:
                    known = self._shared[name] = start()
                except BenchError as exc:
                    self._shared[name] = exc
                    raise
        return known.url

    @property
    def external(self) -> bool:
        return self.settings.semreg_url is not None

    def semreg(self) -> str:
        """The base URL of the semreg server the scenarios share."""
        if self.settings.semreg_url:
            return self.settings.semreg_url
        return self._peer("semreg", self.peers.semreg)

    @contextlib.contextmanager
    def own_semreg(self, *extra: str) -> Iterator[str]:
        """A fresh semreg server for one scenario, started with the flags `extra` and stopped after it (the
        external one with --semreg-url)."""
        if self.settings.semreg_url:
            yield self.settings.semreg_url
            return
        with self.ui.step(f"starting a fresh semreg {' '.join(extra)}".rstrip()):
            peer = self.peers.semreg(*extra)
        try:
            yield peer.url
        finally:
            peer.stop()

    def etcd(self) -> str:
        return self._peer("etcd", self.peers.etcd)

    def oxigraph(self) -> str:
        return self._peer("oxigraph", self.peers.oxigraph)

    def auth_headers(self, url: str) -> dict[str, str]:
        token = self.settings.token
        if token and self.settings.semreg_url and url.startswith(self.settings.semreg_url):
            return {"Authorization": f"Bearer {token}"}
        return {}

    def client(self, base_url: str, timeout_s: float = 120.0) -> httpx.Client:
        return httpx.Client(base_url=base_url, timeout=timeout_s, headers=self.auth_headers(base_url))

    # -- the discovery data set -------------------------------------------------------------------------
    @cached_property
    def dataset(self) -> Dataset:
        s = self.settings
        return Dataset(classes=s.classes, properties=s.properties, instances=s.instances,
                       tags_per_instance=s.tags_per_instance, answer_size=min(s.answer_size, s.instances),
                       seed=s.seed)

    def ensure_ontology(self) -> dict:
        """Upload the synthetic ontology to the shared server once; its figures."""
        if self._ontology_figures is None:
            self._ontology_figures = self.upload_ontology(self.semreg())
        return self._ontology_figures

    def ensure_instances(self) -> dict:
        """Register the synthetic instances on the shared server once, in batches; their figures."""
        if self._instances_figures is None:
            self.ensure_ontology()
            self._instances_figures = self.register_dataset(self.semreg())
        return self._instances_figures

    def load_dataset(self, base_url: str) -> dict:
        """The synthetic ontology and instances on `base_url` (a server of `own_semreg()`), or on the shared
        server once when that is the one (with --semreg-url); their figures."""
        if self.external or self._shared_url() == base_url:
            return {**self.ensure_ontology(), **self.ensure_instances()}
        return {**self.upload_ontology(base_url), **self.register_dataset(base_url)}

    def _shared_url(self) -> str | None:
        known = self._shared.get("semreg")
        return known.url if isinstance(known, PeerProcess) else None

    def upload_ontology(self, base_url: str) -> dict:
        turtle = self.dataset.turtle().encode()
        with self.ui.step(f"uploading the synthetic ontology ({self.dataset.classes} classes)"), \
                self.client(base_url) as http:
            started = time.perf_counter()
            response = expect(http.put(f"/v1/ontologies/{BENCH_ONTOLOGY}", content=turtle,
                                       headers={"Content-Type": "text/turtle"}), 200, 201)
            elapsed = time.perf_counter() - started
        self.uploaded_ontologies.add(BENCH_ONTOLOGY)
        return {"ontology_upload_s": round(elapsed, 3), "ontology_bytes": len(turtle), **server_timings(response)}

    def register_dataset(self, base_url: str) -> dict:
        data, size = self.dataset, self.settings.batch_size
        elapsed = 0.0
        with self.ui.step(f"registering {data.instances} instances × {data.tags_per_instance} tags",
                          total=data.instances) as advance, self.client(base_url) as http:
            for batch in data.batches(size):
                body = {"instances": batch}
                started = time.perf_counter()
                response = expect(http.post("/v1/instances/batch", json=body))
                elapsed += time.perf_counter() - started
                registered = response.json().get("registered")
                if registered is not None and registered != len(batch):
                    raise BenchError(f"a batch of {len(batch)} instances answered registered={registered}")
                self.registered_ids.update(item["id"] for item in batch)
                advance(len(batch))
        return {"register_s": round(elapsed, 3),
                "instances_per_s": round(data.instances / elapsed, 1) if elapsed else None}

    def semreg_pid(self, base_url: str) -> int | None:
        """The process id of the semreg server this run started at `base_url` (None for an external one)."""
        for peer in self.peers.started:
            if peer.name == "semreg" and peer.url == base_url and peer.proc is not None and peer.proc.poll() is None:
                return peer.proc.pid
        return None

    def semreg_log(self, base_url: str, chars: int = 10_000_000) -> str:
        """The end of the log of the semreg server this run started at `base_url` ("" for an external one)."""
        for peer in self.peers.started:
            if peer.name == "semreg" and peer.url == base_url:
                return peer.log_tail(chars)
        return ""

    def metrics(self, http: httpx.Client) -> dict[str, float]:
        """The server's /metrics as {series: value}."""
        from semreg.bench.readings import parse_metrics

        return parse_metrics(expect(http.get("/metrics")).text)

    def wait_settled(self, http: httpx.Client, timeout_s: float = 180.0) -> float:
        """Wait until the server has no derived RDF left to write, to its SPARQL replica or its data directory
        (`semreg_replica_pending` and `semreg_store_rdf_pending` 0), so a
        measurement does not share the server with its catch-up; the seconds waited."""
        started = time.perf_counter()
        with self.ui.step("waiting for the server's background writes"):
            while True:
                seen = self.metrics(http)
                pending = seen.get("semreg_replica_pending", 0.0) + seen.get("semreg_store_rdf_pending", 0.0)
                if not pending:
                    return round(time.perf_counter() - started, 2)
                if time.perf_counter() - started > timeout_s:
                    raise BenchError(f"the server still had {pending:.0f} background writes pending after "
                                     f"{timeout_s:.0f} s")
                time.sleep(0.2)

    # -- wrk ----------------------------------------------------------------------------------------------
    def measure(self, loads: Iterable[Load]) -> dict[str, dict]:
        """wrk over each load, `rounds` times interleaved; per label the median figures."""
        loads = list(loads)
        s = self.settings
        for load in loads:
            self._check(load)
            if s.warmup_s:
                with self.ui.step(f"wrk warm-up {load.label} ({s.warmup_s} s)"):
                    self._wrk(load, wrk.WrkSettings(s.threads, s.connections, s.warmup_s))
        runs: dict[str, list[dict]] = {load.label: [] for load in loads}
        for round_ in range(s.rounds):
            for load in loads:
                of = f", round {round_ + 1}/{s.rounds}" if s.rounds > 1 else ""
                with self.ui.step(f"wrk {load.label} (-t{s.threads} -c{s.connections} -d{s.duration_s}s{of})"):
                    result = self._wrk(load, s.wrk)
                runs[load.label].append(result.figures())
                self.ui.log(f"  {load.label}: {result.requests_per_s:,.0f} req/s, "
                            f"p50 {result.percentiles_ms.get('50')} ms, p99 {result.percentiles_ms.get('99')} ms")
        return {label: median_figures(values) for label, values in runs.items()}

    def _wrk(self, load: Load, settings: wrk.WrkSettings) -> wrk.WrkResult:
        headers = {**self.auth_headers(load.url), **load.headers}
        if load.script is not None:
            assert load.base is not None
            result = wrk.run(load.base, settings, script=load.script)
        else:
            result = wrk.run(load.url, settings, method=load.method, body=load.body, headers=headers)
        if result.errors > max(0, result.requests // 100):  # past 1 %: the figure would measure failures
            raise BenchError(f"{load.label}: {result.errors} of {result.requests} requests failed under wrk "
                             f"(non-2xx/3xx {result.non_2xx_3xx}, socket errors {result.socket_errors})")
        return result

    def _check(self, load: Load) -> None:
        """One request by hand first, so a wrong URL fails with the server's answer rather than wrk's count."""
        headers = {**self.auth_headers(load.url), **load.headers}
        expect(httpx.request(load.method, load.url, content=load.body, headers=headers, timeout=60))

    # -- the end --------------------------------------------------------------------------------------------
    def cleanup(self) -> None:
        """On an external server, remove what the benchmark registered and uploaded."""
        if not self.external or not (self.registered_ids or self.uploaded_ontologies):
            return
        with self.ui.step(f"removing {len(self.registered_ids)} bench instances from {self.semreg()}",
                          total=len(self.registered_ids)) as advance, self.client(self.semreg()) as http:
            for instance_id in sorted(self.registered_ids):
                http.delete(f"/v1/instances/{instance_id}")
                advance()
            for name in sorted(self.uploaded_ontologies):
                http.delete(f"/v1/ontologies/{name}")
        self.registered_ids.clear()
        self.uploaded_ontologies.clear()


def server_timings(response: httpx.Response) -> dict:
    """Numeric `*_ms` / `*_s` fields a semreg response reports about itself (e.g. `reasoning_ms`)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    if not isinstance(body, dict):
        return {}
    return {f"server_{key}": value for key, value in body.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith(("_ms", "_s"))}
