// IRIs shown as CURIEs with the server's prefixes (GET /v1/prefixes), and tags as people write them.
import { h } from "./dom.js";

export const RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
export const ANY = "https://w3id.org/semreg#Any";
let prefixes = {};
let byLength = [];

export function setPrefixes(map) {
  prefixes = map;
  byLength = Object.entries(map).sort((a, b) => b[1].length - a[1].length);
}

export function knownPrefixes() { return prefixes; }

const LOCAL = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

export function curie(iri) {
  if (!iri) return "";
  for (const [name, ns] of byLength) {
    if (iri.startsWith(ns)) {
      const local = iri.slice(ns.length);
      if (local === "" || LOCAL.test(local)) return `${name}:${local}`;
    }
  }
  return `<${iri}>`;
}

// A tag as a string of one term (p and o any) or three, the form registrations take.
export function tagText(tag, { predicateA = true } = {}) {
  if (tag.p === ANY && tag.o === ANY) return curie(tag.s);
  const p = predicateA && tag.p === RDF_TYPE ? "a" : curie(tag.p);
  return `${curie(tag.s)} ${p} ${curie(tag.o)}`;
}

// A term as a link to its concept page, the full IRI on hover.
export function termLink(iri) {
  if (iri === ANY) return h("span", { class: "muted", title: iri, text: "sr:Any" });
  return h("a", { href: `#/concepts/${encodeURIComponent(iri)}`, title: iri, text: curie(iri) });
}

export function tagLinks(tag) {
  return h("span", { class: "mono" }, termLink(tag.s), " ", termLink(tag.p), " ", termLink(tag.o));
}
