"""semreg: a semantic service registry.

Services register what they handle as RDF triple patterns; consumers ask in ontology terms and the
server's reasoner expands the question over the class and property hierarchies.

The rooms, each saying in its docstring what lives there and what it may import, from the top down as
pyproject.toml's import contracts layer them: `cli` (the `semreg` command), `tune` (data fitted offline on measured
collections, shipped in the package), `bench` (`semreg bench`), `node`
(below), `consul` (the Consul-compatible API of `--consul-listen`, over the HTTP edge's state), `http` (the HTTP
edge), `sparql`, `cluster` and `dns` (the SPARQL endpoint's processes, the ring,
DNS for saved queries), `access` (tokens, rate limits, failed authentications), `registry` (instances,
discovery, the coordinator over the shards), `knowledge` (what every node holds whole), `reasoning` (OWL 2 RL,
pure), `storage` (the durable truth), `rdf` and `http1` (terms and syntax; HTTP/1.1 framed by hand), `work`
(request work kept from liveness); `client` (the Python clients) stands apart.

The top-level modules:
- `node`: one registry node, wired (only the HTTP app factory imports it).
- `config`: the server's settings, one frozen object whose fields declare their flags.
- `clock`: time, injected: the one clock a node hands to everything that reads the time or waits.
- `logs`: structured logs, one JSON object (or key=value text) a line.
- `heap`: keeping the garbage collector out of the way of requests.
- `malloc`: giving freed memory back to the system (glibc).
- `kept_json`: JSON bytes kept at exactly their size (orjson's keep their whole buffer).
- `errors`: the one error hierarchy, each error with the HTTP status it maps to.
- `timefmt`: timestamps as semreg writes them (RFC 3339, UTC, milliseconds).
- `shipped`: files shipped beside the code (the SPARQL files of `queries/`), in a checkout or an install.
- `__main__`: `python -m semreg`, the command.
"""

__version__ = "0.1.0"
