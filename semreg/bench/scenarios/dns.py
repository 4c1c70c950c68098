"""The DNS scenario: how many SRV answers a second a node gives for an 18-instance saved query over UDP (a small
load generator of the bench's own, `semreg.bench.aio.dnsload`), against the same question over HTTP, the
saved query's `GET /v1/queries/NAME/discover` and the plain `GET /v1/discover`, under wrk. The server is one
of its own, started with `--dns` (and no DNS rate limit: the load comes from one address)."""
from __future__ import annotations

from urllib.parse import urlencode

from semreg.bench.aio.dnsload import udp_load
from semreg.bench.aio.loop import LoopThread
from semreg.bench.context import BenchContext, Load, expect
from semreg.bench.peers import BenchError, free_port
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario

# the most one UDP answer holds whole (1232 bytes with EDNS): 65 bytes an instance with these ids, its SRV record
# (the target never compressed) and its A record
INSTANCES = 18
OUTSTANDING = 32  # DNS queries in flight at once, as wrk's connections are requests in flight
ONTOLOGY = """@prefix ex: <http://bench.example/dns#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Work a owl:Class . ex:Book a owl:Class ; rdfs:subClassOf ex:Work . ex:Film a owl:Class ; rdfs:subClassOf ex:Work .
ex:hasGenre a owl:ObjectProperty . ex:Horror a owl:Class .
"""
QUESTION = {"s": "ex:Work", "p": "ex:hasGenre", "o": "ex:Horror"}


def instances() -> list[dict]:
    return [{"id": f"dns-{n:02d}", "service": "horror", "address": f"10.77.0.{n + 1}", "port": 8000 + n, "ttl": 0,
             "weight": 1 + n % 5, "tags": [f"ex:{('Book', 'Film')[n % 2]} ex:hasGenre ex:Horror"]}
            for n in range(INSTANCES)]


@scenario("dns", f"SRV answers a second for a {INSTANCES}-instance saved query over UDP ({OUTSTANDING} in flight) vs "
          "the same question over GET /v1/queries/NAME/discover and GET /v1/discover (wrk)", needs=("wrk",),
          targets=(Target("DNS SRV/discover req/s", "ratio_dns_discover", ">=", 1.0),
                   Target("DNS p99", "dns.p99_ms", "<=", 10.0, "ms")))
def dns_srv(ctx: BenchContext) -> dict:
    dns_port = free_port()
    with ctx.ui.step("starting semreg with --dns"):
        peer = ctx.peers.semreg("--dns", f"127.0.0.1:{dns_port}", "--dns-rate", "0")
    try:
        with ctx.client(peer.url) as http:
            expect(http.put("/v1/ontologies/dns-bench", content=ONTOLOGY, headers={"Content-Type": "text/turtle"}))
            expect(http.post("/v1/instances/batch", json={"instances": instances()}))
            expect(http.put("/v1/queries/horror", json=QUESTION))
            found = expect(http.get("/v1/queries/horror/discover")).json()["instances"]
            if len(found) != INSTANCES:
                raise BenchError(f"the saved query answers {len(found)} instances, not {INSTANCES}")
        s = ctx.settings
        with LoopThread("semreg-bench-dns") as loop:
            if s.warmup_s:
                with ctx.ui.step(f"DNS warm-up ({s.warmup_s} s)"):
                    loop.run(udp_load("127.0.0.1", dns_port, "_horror._tcp.semreg.", "SRV", INSTANCES,
                                      outstanding=OUTSTANDING, duration_s=s.warmup_s), s.warmup_s + 30)
            with ctx.ui.step(f"DNS SRV over UDP ({OUTSTANDING} in flight, {s.duration_s} s)"):
                result = loop.run(udp_load("127.0.0.1", dns_port, "_horror._tcp.semreg.", "SRV", INSTANCES,
                                           outstanding=OUTSTANDING, duration_s=s.duration_s), s.duration_s + 30)
        dns_figures = result.figures()
        if result.errors or result.answered == 0:
            raise BenchError(f"DNS: {result.errors} answers were not whole {INSTANCES}-record answers "
                             f"({result.answered} were)")
        ctx.ui.log(f"  dns: {dns_figures['queries_per_s']:,.0f} queries/s, p50 {dns_figures.get('p50_ms')} ms, "
                   f"p99 {dns_figures.get('p99_ms')} ms")
        peers = ctx.measure([Load("saved-discover", peer.url + "/v1/queries/horror/discover"),
                             Load("discover", peer.url + "/v1/discover?" + urlencode(QUESTION))])
    finally:
        peer.stop()
    discover_rps = peers["discover"]["requests_per_s"]
    return {"instances": INSTANCES, "outstanding": OUTSTANDING, "dns": dns_figures, "peers": peers,
            "ratio_dns_discover": round(dns_figures["queries_per_s"] / discover_rps, 3) if discover_rps else None,
            "ratio_dns_saved_discover": round(dns_figures["queries_per_s"] / peers["saved-discover"]["requests_per_s"],
                                              3)}
