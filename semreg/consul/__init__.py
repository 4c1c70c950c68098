"""The Consul-compatible API (`--consul-listen`): the part of Consul's HTTP API that clients and tools use, mapped
onto this node's registry and saved queries, never a second registry beside them (docs/how-to/consul.md).

`app` (the Starlette app of the listener: its routes, Consul's plain-text errors), `access` (`X-Consul-Token` and
`Authorization: Bearer` as semreg's tokens and scopes, `ns` as an environment, `dc` as this ring), `agent` (the
agent API: register, deregister, TTL check updates, the agent's services and itself), `catalog` (the catalog,
health and status reads, blocking on the registry's own watches), `blocking` (Consul's `index`/`wait` and its
`X-Consul-*` headers over a watched topic), `short_path` (the repeated name reads sent from their kept answers,
without the router), and the mapping, free of HTTP: `encoding` (gzip for the clients that ask, as Consul's agent
answers them), `registration` (a Consul service
definition as a semreg registration body), `durations` (Go's duration strings), `strconv` (Go's quoted strings,
whole numbers and booleans), `tags` (which Consul tags are triple patterns, and the plain ones kept beside them),
`entries` (an instance as Consul's service, check, node and health entries), `expressions` (Consul's `?filter=`
grammar, go-bexpr's, as a syntax tree) and `filters` (a filter checked against an endpoint's entries' type and
evaluated on them).

May import every room below `semreg.node`, the HTTP room's request helpers and handlers' checks included (it
answers through them as the public API does); only `semreg.node` imports it.
"""
