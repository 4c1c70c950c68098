"""The durable truth in pyoxigraph (`store`): the records of instances, ontologies and prefixes,
written before a request is acknowledged, and the registry vocabulary that writes an instance as RDF
(`vocabulary`).

May import: `semreg.rdf` and the top-level modules (`errors`, `timefmt`). Must not import reasoning,
the registry, SPARQL, the cluster or HTTP: everything above reads and writes through it.
"""
