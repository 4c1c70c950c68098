"""The SPARQL 1.1 endpoint's machinery: the protocol operation (`protocol`), representations
(`formats`), the lexical scan (`scan`), evaluation within limits (`runner`), the result cache
(`cache`), the service description (`description`); the replica the queries read and what feeds it
(`replica`, `feed` with the views it keeps packed, `packed_views`, `queries`), on disk (`checkpoints`) or in
memory, and a worker's copy of it (`copies`); the query processes (`worker`, `sandbox`, `job`, `service`,
`shared_page`, `frames`), the server's side of them (`pool`, made of parts it owns: `pool_lifecycle` over `pool_process`,
`pool_stream`, `pool_queries`, `pool_placement`), their side of the connections they serve
(`connections`, with its part `served_connections`; `channel`) and the hand-over of connections to them
(`handoff`).

May import: `semreg.access` (tokens), `semreg.storage`, `semreg.rdf`, `semreg.http1` and the top-level
modules. Must not import the registry, the knowledge or the reasoning (it reads RDF, not their objects),
the cluster, or HTTP (`semreg.http`, Starlette): the ASGI route over this machinery is `semreg.http.sparql`.
"""
