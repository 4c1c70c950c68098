"""The sparql scenario: a one-pattern SELECT on semreg's /sparql against the Oxigraph server holding
the same graphs, the same query repeated (semreg answers from its cache) and a new one every request."""
from __future__ import annotations

from urllib.parse import urlencode

from semreg.bench import stores, wrk
from semreg.bench.context import BenchContext, Load, expect
from semreg.bench.dataset import NS, RDFS_SUBCLASSOF, class_iri
from semreg.bench.report import Target
from semreg.bench.scenarios.common import SPARQL_JSON, scenario


# -- 2. a one-pattern SPARQL query against the Oxigraph server --------------------------------------------
def distinct_sparql(classes: int) -> tuple[wrk.RandomParam, ...]:
    """`SELECT ?x WHERE { ?x rdfs:subClassOf bench:C<random> } LIMIT <random>`: a new query each request."""
    template = (f"SELECT ?x WHERE {{ ?x <{RDFS_SUBCLASSOF}> <{NS}C%05d> }} LIMIT %d")
    return (wrk.RandomParam("query", template, ((0, classes - 1), (1, 1000))),)


@scenario("sparql", "one-pattern SELECT on /sparql vs the Oxigraph server holding the same graphs: the same query "
          "repeated (semreg answers from its cache) and a new query on every request",
          needs=("wrk", "oxigraph"),
          targets=(Target("repeated: semreg/oxigraph req/s", "ratio_semreg_oxigraph", ">=", 0.5),
                   Target("distinct: semreg/oxigraph req/s", "ratio_distinct_semreg_oxigraph", ">=", 0.5)))
def sparql(ctx: BenchContext) -> dict:
    figures = {**ctx.ensure_ontology(), **ctx.ensure_instances()}
    semreg, oxigraph = ctx.semreg(), ctx.oxigraph()
    with ctx.ui.step("copying semreg's graphs into the Oxigraph server"), ctx.client(semreg) as http:
        copied = stores.copy_graphs(http, oxigraph)
    query = ctx.dataset.sparql_query()
    headers = {"Accept": SPARQL_JSON}
    semreg_url = f"{semreg}/sparql?{urlencode({'query': query})}"
    oxigraph_url = f"{oxigraph}/query?{urlencode({'query': query})}"
    rows = {}
    with ctx.client(semreg) as http:
        for label, url in (("semreg", semreg_url), ("oxigraph", oxigraph_url)):
            rows[label] = len(expect(http.get(url, headers=headers)).json()["results"]["bindings"])
        sample = {}
        for k in (0, ctx.dataset.sparql_class, ctx.dataset.classes - 1):
            q = f"SELECT ?x WHERE {{ ?x <{RDFS_SUBCLASSOF}> <{class_iri(k)}> }} ORDER BY ?x LIMIT 50"
            answers = [sorted(b["x"]["value"] for b in expect(http.get(u, params={"query": q}, headers=headers))
                              .json()["results"]["bindings"]) for u in (f"{semreg}/sparql", f"{oxigraph}/query")]
            sample[class_iri(k)] = answers[0] == answers[1]
    result = {"query": query, "rows": rows, "graphs_copied": copied, "distinct_sample_agrees": sample, **figures}
    if rows["semreg"] != rows["oxigraph"] or not all(sample.values()):
        result["warning"] = f"the two servers answer differently: rows {rows}, sample {sample}"
        ctx.ui.log(f"[yellow]  warning: {result['warning']}")
    distinct = distinct_sparql(ctx.dataset.classes)
    semreg_headers = {**ctx.auth_headers(semreg), **headers}
    peers = ctx.measure([
        Load("semreg", semreg_url, headers=headers), Load("oxigraph", oxigraph_url, headers=headers),
        Load("semreg-distinct", semreg_url, headers=headers, base=semreg,
             script=wrk.lua_random_script("/sparql", distinct, semreg_headers)),
        Load("oxigraph-distinct", oxigraph_url, headers=headers, base=oxigraph,
             script=wrk.lua_random_script("/query", distinct, headers)),
    ])
    return {**result, "peers": peers,
            "ratio_semreg_oxigraph": round(peers["semreg"]["requests_per_s"] / peers["oxigraph"]["requests_per_s"], 3),
            "ratio_distinct_semreg_oxigraph": round(peers["semreg-distinct"]["requests_per_s"]
                                                    / peers["oxigraph-distinct"]["requests_per_s"], 3)}
