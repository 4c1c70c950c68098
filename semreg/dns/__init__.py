"""DNS for saved queries (`semreg serve --dns ADDR:PORT`): `_NAME._tcp.DOMAIN` SRV, `NAME.DOMAIN` A/AAAA and
`ID.instance.DOMAIN` for one instance, with an environment as `_NAME._tcp.ENV.DOMAIN` (as Consul takes
datacenters), answered from the node's coordinator like `GET /v1/discover`, so any node of a ring answers.

- `names`: what a question's name asks (pure).
- `answers`: a query's bytes in, the answer's bytes out: dnspython reads and writes the wire format, a
  malformed packet gets FORMERR, an answer larger than the client's UDP size is truncated (TC) so that it
  asks again over TCP (pure but for the `Resolver` it awaits).
- `directory`: the `Resolver` over the node (saved queries, their discovery, one instance).
- `server`: the UDP and TCP listeners on the node's event loop, with a token bucket per client address.

May import: `semreg.registry`, `semreg.knowledge`, `semreg.access` (the token buckets) and below. Must not
import the cluster, SPARQL or HTTP.
"""
