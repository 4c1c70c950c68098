"""HTTP/1.1 framed by hand, both sides: the client that health probes, peers and the benchmark send
with (`client`), the request framing of the SPARQL connections the query processes serve
(`server`), and the client and scheme of such a request as uvicorn's proxy headers rule gives them
(`forwarded`).

Bytes only: imports nothing of semreg, and nothing of the registry's domain.
"""
