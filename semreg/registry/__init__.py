"""The registry: instances with their leases and statuses, discovery over their tags, watches, health checks,
routing, and the coordinator over the shards that hold them.

- `instances`: an instance, what a service registered plus its lease and status; its JSON view and record.
- `registry`: the registry of one shard: instances, leases, statuses and the tag catalogue, reporting changes.
- `catalogue`: the distinct-tag catalogue, which instances carry each tag, indexed by component for expansion.
- `pairs`: the registered tags by subject and object together, for a new question that names both.
- `selector`: which instances a read covers: one environment (or all) and metadata that must hold.
- `query_params`: the one parser of a discovery question's parameters, from any map of strings.
- `discovery`: discovery results: each shard's part, the merge of the parts, their signature and JSON body.
- `similar`: the registered tags that match a query as `similar`: logically not, but close in each component.
- `conjunctive`: several patterns at once (`"all"`, `"provided"`): the combination, a shard's part and the merge.
- `closeness`: how close an instance is to a conjunctive question asked with `similar`, to rank within a degree.
- `matchmaker`: the learned matchmaker: a conjunction's signals weighed into the score that ranks it (weights
  shipped as data, `matchmaker.json`).
- `questions`: a discovery question of either form (one pattern or several), by one name; each form does what is
  done with a question through the methods of `discovery.Query`.
- `saved`: a saved query as the discovery it stands for: its checked, stored form and the question it asks.
- `targets`: an answer's routable instances as plain data, for DNS records and Prometheus targets.
- `listing`: reads for a person's screen: a page of the instance list, and an overview's counts.
- `environment_counts`: an overview's counts kept per environment as the registry changes.
- `tag_union`: a ring's distinct tags, the union of the members' tag hashes, counted again only when they moved.
- `watch`: per-query change detection for blocking reads, and the response cache.
- `indexes`: the indexes a watchable read answers with, moving only with the changes its reader may see.
- `feed`: the changes of instances as a numbered feed, for a view that shows a few of many (the console).
- `changelog`: this node's shard's recent changes, numbered, for other nodes to follow.
- `health`: active health checks: when each is due, and the thread that probes.
- `probes`: the probes themselves: HTTP GET over kept connections, and TCP connect.
- `balancer`: choosing an instance for a route (least-load, spillover, round-robin), pure.
- `routing`: routing by redirect: an instance chosen for a question, the route counted against it.
- `shard`: the `Shard` interface every member's shard implements, and `OwnShard`, what a ring drives of this node's.
- `local_shard`: the shard of this process: its registry, durable records, lease timer and health checks.
- `restore`: a shard's instances brought back from their records at start-up, in batches.
- `revisions`: revisions that order the writes of an instance wherever they are made.
- `removals`: a shard's recent removals, the tombstones another node may not hold yet.
- `digests`: digests of what a shard holds, per arc of a ring, for anti-entropy.
- `merged`: copies of instances from several shards merged into what one shard holding them all would hold.
- `inventory`: what a shard holds as revisions, for anti-entropy and a restarted member's repair.
- `primaries`: which instances' leases and checks a shard runs after a ring change (those it owns first).
- `placement`: where instances live: an instance's owners and the shards a read asks (`Single`: a node alone).
- `coordinator`: the registry as a client sees it: writes to the owners, reads gathered and merged, watches.
- `writes`: a registration, a batch or a removal, sent to the owners of its instances.
- `quorum`: a write acknowledged once a quorum of owners hold it, the rest finishing in the background.
- `backups`: backups of what a node or a ring holds, and their restore.

May import: `semreg.knowledge`, `semreg.reasoning`, `semreg.storage`, `semreg.rdf`, `semreg.http1`
(the probes' framing) and the top-level modules; time comes from the injected `semreg.clock`. Must not
import SPARQL, the cluster or HTTP: a ring plugs in through `placement.Placement` and
`shard.Shard`, which it implements, and drives this node's shard through `shard.OwnShard`.
"""
