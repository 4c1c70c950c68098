"""The HTTP edge: the ASGI app and its life cycle (`app`), each route declared once (`endpoints`,
the table and the handlers, a module a resource, in `routes`), `/openapi.json` (`openapi`), request
bodies as pydantic models (`schemas`; conjunctive discovery's in `conjunctive_schemas`, the console's
overview and changes in `console_schemas`), reading requests and writing JSON answers (`requests`,
`responses`), the access gate (`gate`), the fast path of discovery (`fastpath`), metrics
(`metrics`), the SPARQL route (`sparql`; on a node started with `--no-sparql`, `sparql_forward`), the
node-to-node routes (`internal`) on their own listener (`cluster_listener`) and the console's files (`console`).

May import every room below it and `semreg.node` (the app factory alone wires the node). Nothing below
imports it: the domain knows no HTTP.
"""
