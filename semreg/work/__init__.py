"""Request work kept from the node's liveness: what a request may cost (`budget`), where and how its work runs
(`lane`: slices on the event loop, one a turn of the loop, so that heartbeats, expiries, checks and `/healthz`
never wait behind it for long), how far behind the loop runs and when new work is shed because of it (`lag`),
and where the loop got stuck when it did (`stalls`, a thread that logs the loop's stack).

One mechanism for every kind of request work (docs/operations/limits.md, Liveness): a budget checked up front and counted as the
work runs, the work in slices on the loop or, over inputs nothing else changes, on a worker thread, and 503
with `Retry-After` when the node is behind.

May import: `semreg.errors` and the standard library (and greenlet). The registry, the knowledge and the HTTP
edge use it; reasoning stays pure and is handed a callable instead (`semreg.reasoning.similarity`).
"""
