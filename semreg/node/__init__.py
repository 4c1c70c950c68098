"""A node: its parts wired, and the services they run as (docs/design/architecture.md, Services).

`node` (the wiring: the parts, and the list of services in the order they start), `services` (a service, and the
manager that starts services after the ones they need, gives the start-up up when a stop is asked, and stops them
in reverse, each within a bound), and the services themselves: `work` (the event loop's lag and stall watch, the
lane of request work), `writer` (the store's writer thread), `replica` (the SPARQL replica's feed, and what it
shows of the registry), `knowledge` (ontologies, prefixes, saved queries, restored), `registry` (this node's shard
and the coordinator; the tombstone trim of a node alone), `at_rest` (the data directory's RDF writer), `memory`
(the collector and the C heap), `ring` (membership in a ring), `edge` (the HTTP edge: the apps, their typed
state, the query processes, the tokens' reload), `listeners` (the public and node-to-node HTTP ports, the Consul API's, DNS) and
`process` (`semreg serve`'s process: its event loop, signals and exit status).

May import every room but `cli` and `bench` (it is the top of the server: the HTTP edge is one of its parts).
Only `semreg.cli.serve` imports it.
"""
from semreg.node.memory import RELEASE_EVERY_S
from semreg.node.node import Node
from semreg.node.registry import TRIM_EVERY_S

__all__ = ["RELEASE_EVERY_S", "TRIM_EVERY_S", "Node"]
