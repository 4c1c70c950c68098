"""Reasoning over ontologies, pure: the OWL 2 RL rules (`rules`), their closure kept up to date
(`closure`, `reasoner`; facts withdrawn by delete and re-derive in `rederive`; terms interned by `terms`,
literals compared by value in `literals`, domains and ranges propagated by `propagation`), the hierarchy
index matching runs on (`hierarchy`, `reindex`), what a queried term expands to (`expansion`), degrees
and ranking (`matching`), why a tag matched (`explanation`), how close two concepts are when logic
relates them not at all (`similarity`, the `similar` degree), what the learned matchmaker reads of two terms
(`signals`: the parts of the similarity and the approximated subsumption) and the known terms (`lexicon`).

May import: `semreg.rdf` and the top-level `errors`. Must not import storage, the registry, SPARQL, the
cluster or HTTP, the network or the clock: what it computes is a function of the triples it is given
(the reasoner times its own work, to report it).
"""
