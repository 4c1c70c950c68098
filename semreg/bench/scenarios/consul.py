"""The Consul scenario: what a Consul client's read of a saved query's name costs beside semreg's own read of the
same question. `GET /v1/health/service/NAME` on the Consul listener (the read Prometheus's Consul discovery
repeats, without `passing`) against `GET /v1/discover` with the saved query's pattern on the public port, each
under wrk with the same instances registered. The server is one of its own, started with `--consul-listen`; the
bench drives it as a client does, over HTTP only."""
from __future__ import annotations

from urllib.parse import urlencode

from semreg.bench.context import BenchContext, Load, expect
from semreg.bench.peers import BenchError, free_port
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario
from semreg.bench.scenarios.dns import INSTANCES, ONTOLOGY, QUESTION, instances

NAME = "horror"
GZIP = {"Accept-Encoding": "gzip"}  # as Go's HTTP transport asks, so Prometheus's and consul-template's reads


@scenario("consul", f"GET /v1/health/service/{{saved query}} on the Consul listener vs GET /v1/discover for the "
          f"same question, {INSTANCES} instances, plain and gzipped as Go clients ask (wrk)", needs=("wrk",),
          targets=(Target("Consul health/discover req/s", "ratio_consul_discover", ">=", 1 / 1.5),
                   Target("Consul/discover p99", "ratio_consul_discover_p99", "<=", 1.5),
                   Target("Consul gzip/discover req/s", "ratio_consul_discover_gzip", ">=", 1 / 1.5),
                   Target("Consul gzip/discover p99", "ratio_consul_discover_p99_gzip", "<=", 1.5)))
def consul(ctx: BenchContext) -> dict:
    consul_port = free_port()
    with ctx.ui.step("starting semreg with --consul-listen"):
        peer = ctx.peers.semreg("--consul-listen", f"127.0.0.1:{consul_port}")
    consul_url = f"http://127.0.0.1:{consul_port}"
    try:
        with ctx.client(peer.url) as http:
            expect(http.put("/v1/ontologies/consul-bench", content=ONTOLOGY, headers={"Content-Type": "text/turtle"}))
            expect(http.post("/v1/instances/batch", json={"instances": instances()}))
            expect(http.put(f"/v1/queries/{NAME}", json=QUESTION))
            found = expect(http.get(f"{consul_url}/v1/health/service/{NAME}")).json()
            direct = expect(http.get("/v1/discover", params=QUESTION)).json()["instances"]
            if len(found) != INSTANCES or len(direct) != INSTANCES:
                raise BenchError(f"the Consul read answers {len(found)} instances and /v1/discover {len(direct)}, "
                                 f"not {INSTANCES} each")
        peers = ctx.measure([Load("consul-health", f"{consul_url}/v1/health/service/{NAME}"),
                             Load("consul-health-gzip", f"{consul_url}/v1/health/service/{NAME}", headers=GZIP),
                             Load("discover", peer.url + "/v1/discover?" + urlencode(QUESTION))])
    finally:
        peer.stop()
    discover_fig = peers["discover"]
    rps, p99 = discover_fig["requests_per_s"], discover_fig.get("p99_ms")
    figures: dict = {"instances": INSTANCES, "peers": peers}
    for label, suffix in (("consul-health", ""), ("consul-health-gzip", "_gzip")):
        fig = peers[label]
        figures[f"ratio_consul_discover{suffix}"] = round(fig["requests_per_s"] / rps, 3) if rps else None
        figures[f"ratio_consul_discover_p99{suffix}"] = round(fig["p99_ms"] / p99, 3) \
            if p99 and fig.get("p99_ms") is not None else None
    return figures
