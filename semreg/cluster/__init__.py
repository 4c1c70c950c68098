"""A ring of nodes: the consistent-hash ring (`ring`), membership on etcd leases (`membership`,
`kv`), the other nodes' shards over their internal API (`peer`, `peerhttp`, `wire`), the ring's
placement, followers, hand-off and anti-entropy (`cluster`, `digests`, `barrier`) and which copy of
each instance the SPARQL replica shows (`replica_copies`).

May import: `semreg.registry` (the seams it implements: `Placement`, `Shard`), `semreg.knowledge`,
`semreg.reasoning`, `semreg.storage`, `semreg.rdf`, `semreg.http1` and the top-level modules. Must not
import HTTP or SPARQL: the node wires the replica to it.
"""
