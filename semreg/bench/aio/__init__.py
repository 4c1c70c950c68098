"""Load the bench process generates itself, on asyncio: long polls, heartbeats, a health-check target.

wrk repeats one request; these scenarios need many connections that each wait (10,000 long polls),
a schedule (heartbeats spread evenly over their period) or a server (the target of active health
checks). Everything runs on one event loop in a daemon thread (`LoopThread`), so a scenario stays a
plain function that can run wrk meanwhile. HTTP goes over raw asyncio streams with a minimal
HTTP/1.1 client (`Connection`, framed by `semreg.http1.client`): httpx, and h11 too, cost more per request
and per connection than the bench process can spare at 10,000 connections or 1,000 requests a second
on a shared machine (the figures are in `semreg.http1.client`).

    connection.py  one keep-alive HTTP/1.1 connection (`Connection`) and the response it reads
    loop.py        the event loop in its daemon thread (`LoopThread`), and `gather_limited`
    crowd.py       many blocking reads held at once, one connection each (`WatchCrowd`)
    heartbeats.py  heartbeats on an even schedule (`Heartbeater`, `heartbeat_due`)
    metrics.py     /metrics sampled in the background while other load runs (`sample_metrics`)
    target.py      a tiny HTTP server for active health checks to hit (`HealthTarget`)
    probes.py      /healthz probed, blocking reads re-armed, writes at known times, /v1/cluster sampled, the
                   bench loop's own lag (the noisy-neighbour scenarios)
    dnsload.py     a bounded DNS load over UDP: queries in flight on one socket, every answer read back
    adversary.py   the noisy neighbour: the heaviest requests of each kind looped in a child process (`Adversary`)

What these load drivers measure is summarised by `semreg.bench.stats`; what the bench reads off the
server's process by `semreg.bench.readings`.
"""
