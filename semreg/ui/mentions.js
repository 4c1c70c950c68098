// Instances whose tags mention a term (in any position, or a whole tag), asked of /sparql over the
// registry graph. Terms are resolved by the server first (GET /v1/expand parses them as every route
// does), so an unknown prefix is the server's own sentence.
import { getJSON, qs, sparql } from "./api.js";

const SR = "https://w3id.org/semreg#";
const RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";

// The term or tag text as full IRIs: {s, p, o} with p and o null for one term.
export async function resolve(text) {
  const parts = text.trim().split(/\s+/);
  if (parts.length !== 1 && parts.length !== 3) {
    throw new Error(`'${text}' has ${parts.length} terms; give one term, or a whole tag of three.`);
  }
  const [s, p, o] = parts;
  const answer = await getJSON(`/v1/expand${qs({ s, p, o, match: "exact" })}`);
  return parts.length === 1 ? { s: answer.query.s, p: null, o: null } : answer.query;
}

// [{id, service, status, tag: {s, p, o}}], at most `limit` rows.
export async function mentioning(term, limit = 100_000) {
  const pattern = term.p === null
    ? `{ ?t rdf:subject <${term.s}> } UNION { ?t rdf:predicate <${term.s}> } UNION { ?t rdf:object <${term.s}> }`
    : `?t rdf:subject <${term.s}> ; rdf:predicate <${term.p}> ; rdf:object <${term.o}> .`;
  const query = `PREFIX sr: <${SR}>
PREFIX rdf: <${RDF}>
SELECT ?id ?service ?status ?s ?p ?o WHERE {
  ?i a sr:Instance ; sr:id ?id ; sr:service ?service ; sr:status ?status ; sr:tag ?t .
  ${pattern}
  ?t rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o .
} ORDER BY ?id LIMIT ${limit}`;
  const body = await (await sparql(query)).json();
  return body.results.bindings.map((b) => ({ id: b.id.value, service: b.service.value, status: b.status.value,
    tag: { s: b.s.value, p: b.p.value, o: b.o.value } }));
}
