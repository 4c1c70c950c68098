"""A ring of nodes: the consistent-hash ring (`ring`), membership on etcd leases (`membership`,
`kv`, with `supervisor` starting its loops again whatever ends them; what each member declares in its key:
`member_key`), the other nodes' shards over their internal API (`peer`, `peerhttp`, `wire`), and `cluster`,
this node in the ring, which owns one part for each concern: placement over the membership view (`placement`),
the followers of the other nodes' change logs with the read barrier (`followers`, `barrier`) and which copy
of each instance the SPARQL replica shows (`replica_copies`), statuses sent to the other owners
(`statuses`), the writes an owner missed, brought to it when it answers again (`hints`), hand-off and
anti-entropy (`antientropy`), what every node holds whole, the ontologies and prefixes
published in etcd (`shared`), and `/sparql` sent from a member without the replica to one that serves it
(`sparql_forward`). Beside them: etcd reached over TLS and as an etcd user (`etcd_access`), the
membership lease refreshed from a thread of its own (`pacemaker`), the revision slot each member claims
when it joins, unique among the live members (`slots`), records in etcd that only a holder of the
cluster secret can write (`signed`), and mutual TLS between the nodes (`tls`).

Every shard, this node's own and the others', is asked through `semreg.registry.shard.Shard`; of this
node's insides the ring is handed at wiring its shard as an `OwnShard`, its recent removals and its
revisions, and reaches into none of them.

May import: `semreg.registry` (the seams it implements: `Placement`, `Shard`), `semreg.knowledge`,
`semreg.reasoning`, `semreg.storage`, `semreg.rdf`, `semreg.http1` and the top-level modules. Must not
import HTTP or SPARQL: the node wires the replica to it.
"""
