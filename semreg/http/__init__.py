"""The HTTP edge: the public ASGI app (`app`), the typed state its handlers and the cluster listener's read
(`state`: `AppState`, through `app_state(request)`), each route declared once (`endpoints`,
the table and the handlers, a module a resource, in `routes`), `/openapi.json` (`openapi`), request
bodies as pydantic models (`schemas`; an instance's view and its health in `instance_views`,
conjunctive discovery's in `conjunctive_schemas`, the console's overview and changes in
`console_schemas`), reading requests and writing JSON answers (`requests`,
`responses`), the access gate (`gate`), the fast path of discovery (`fastpath`), metrics
(`metrics`), the SPARQL route (`sparql`; on a node started with `--no-sparql`, `sparql_forward`), the
node-to-node routes (`internal`, each request decoded first by `internal_decoding`, where only its shape makes
a 400) on their own listener (`cluster_listener`) and the console's files (`console`).

May import every room below it, and never `semreg.node`, which wires it and runs its life cycle: the node hands
it an `AppState`, not itself. Nothing below imports it: the domain knows no HTTP.
"""
