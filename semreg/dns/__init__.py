"""DNS for saved queries (`semreg serve --dns ADDR:PORT`): `_NAME._tcp.DOMAIN` SRV, `NAME.DOMAIN` A/AAAA and
`ID.instance.DOMAIN` for one instance, with an environment as `_NAME._tcp.ENV.DOMAIN` (as Consul takes
datacenters), and Consul's `[TAG.]NAME.service[.ENV].DOMAIN`, so a resolver configured for Consul asks unchanged;
answered from the node's coordinator like `GET /v1/discover`, so any node of a ring answers.

- `names`: what a question's name asks (pure).
- `answers`: a query's bytes in, the answer's bytes out: dnspython reads and writes the wire format, a
  malformed packet gets FORMERR, a negative answer carries the zone's SOA (pure but for the `Resolver` it
  awaits).
- `fit`: an answer cut to the size its transport carries (1232 bytes over UDP at most, 65,535 over TCP): as
  many whole records as fit, TC when any was left out (pure).
- `apex`: the zone's own records, SOA, NS and the apex's addresses (pure).
- `directory`: the `Resolver` over the node (saved queries, their discovery, one instance).
- `connections`: the TCP connections held, per client address and in all, with a deadline for each message
  and each answer (on the injected clock).
- `server`: the UDP and TCP listeners on the node's event loop, with a token bucket per client address.

May import: `semreg.registry`, `semreg.knowledge`, `semreg.access` (the token buckets), `semreg.clock` and
below. Must not import the cluster, SPARQL or HTTP.
"""
