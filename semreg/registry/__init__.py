"""The registry: instances with their leases and statuses (`instances`, `registry`), the tag
catalogue (`catalogue`), which instances a read covers (`selector`), discovery parts and their merge
(`discovery`), per-query watches (`watch`) and their indexes by environment (`indexes`), the change log
(`changelog`), active health checks
(`health`, `probes`), balancing and routing (`balancer`, `routing`), the `Shard` interface every member's
shard implements (`shard`) and the shard of this process (`local_shard`), with the revisions that order
writes (`revisions`), its removals not yet settled with a ring (`removals`) and digests of what it holds per
arc of a ring (`digests`), where instances live (`placement`), the coordinator over the shards
(`coordinator`) and its writes, acknowledged at a quorum of owners (`writes`, `quorum`).

May import: `semreg.knowledge`, `semreg.reasoning`, `semreg.storage`, `semreg.rdf`, `semreg.http1`
(the probes' framing) and the top-level modules; time comes from the injected `semreg.clock`. Must not
import SPARQL, the cluster or HTTP: a ring plugs in through `placement.Placement` and
`shard.Shard`, which it implements, and drives this node's shard through `shard.OwnShard`.
"""
