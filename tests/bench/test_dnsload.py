"""The bench's DNS load generator (`semreg.bench.aio.dnsload`) against the DNS listeners of the app in this
process: bounded in time and in queries in flight, and counting only whole answers."""
from __future__ import annotations

import asyncio

from support.inprocess import InProcess
from support.paths import ONTOLOGIES

from semreg.bench.aio.dnsload import udp_load


def test_the_load_counts_whole_answers_for_its_duration_and_nothing_else():
    with InProcess(dns="127.0.0.1:0", dns_rate_per_s=0) as srv:
        c = srv.client()
        assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                     headers={"Content-Type": "text/turtle"}).status_code == 201
        batch = [{"id": f"l{n}", "service": "l", "address": f"10.0.0.{n + 1}", "port": 80, "ttl": 0,
                  "tags": ["ex:Livro"]} for n in range(5)]
        assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
        assert c.put("/v1/queries/books", json={"s": "ex:Livro"}).status_code == 201
        port = srv.node.dns.port
        good = asyncio.run(udp_load("127.0.0.1", port, "_books._tcp.semreg.", "SRV", 5, outstanding=4,
                                    duration_s=0.5))
        assert good.answered > 0 and good.errors == 0 and good.lost == 0
        assert 0.5 <= good.elapsed_s < 2.0
        assert good.figures()["queries_per_s"] > 0 and "p99_ms" in good.figures()
        wrong = asyncio.run(udp_load("127.0.0.1", port, "_books._tcp.semreg.", "SRV", 6, outstanding=2,
                                     duration_s=0.2))
        assert wrong.answered == 0 and wrong.errors > 0  # five records where six were expected
        unknown = asyncio.run(udp_load("127.0.0.1", port, "_nothing._tcp.semreg.", "SRV", 0, outstanding=2,
                                       duration_s=0.2))
        assert unknown.answered == 0 and unknown.errors > 0  # NXDOMAIN is not an answer
