"""What every node holds whole: the uploaded ontologies with the closure over them (`ontologies`),
the CURIE prefixes, the hierarchy and the known terms (`knowledge`), the saved queries kept under
DNS-safe names (`queries`), durable in the store and
published to the SPARQL replica through the `ontologies.Published` port that the node wires in.

May import: `semreg.reasoning`, `semreg.storage`, `semreg.rdf` and the top-level modules. Must not
import the registry, SPARQL, the cluster or HTTP.
"""
