// The discovery playground: subject, predicate and object with completion from the known terms and
// prefixes; matches grouped by degree with distances and why each tag matched (the chain of steps,
// from /v1/expand); near misses (the similar degree, when asked) with their similarity and what makes them
// close (the words they share, the deepest common ancestor); the instance the balancer would pick now
// (/v1/route/preview).
import { getJSON, qs } from "../api.js";
import { clear, errorBox, field, h, showError } from "../dom.js";
import { curie, knownPrefixes, tagLinks, termLink } from "../terms.js";

const DEGREES = ["exact", "narrower", "broader", "overlap", "similar"];
const RELATION = {
  "http://www.w3.org/2000/01/rdf-schema#subClassOf": "subclass of",
  "http://www.w3.org/2000/01/rdf-schema#subPropertyOf": "subproperty of",
  "http://www.w3.org/1999/02/22-rdf-syntax-ns#type": "a",
  "http://www.w3.org/2002/07/owl#equivalentClass": "equivalent to",
  "http://www.w3.org/2002/07/owl#equivalentProperty": "equivalent to",
  "http://www.w3.org/2002/07/owl#sameAs": "same as",
};
const COMPONENT = { s: "subject", p: "predicate", o: "object" };

export async function render(main, { query, navigate }) {
  const inputs = {};
  for (const k of ["s", "p", "o"]) {
    inputs[k] = h("input", { name: k, list: "known-terms", value: query.get(k) || "", autocomplete: "off", size: 28,
      required: k === "s" ? true : null, placeholder: k === "s" ? "ex:Obra" : "any" });
  }
  const match = h("select", { name: "match" }, [["exact,narrower", "exact and narrower (default)"], ["all", "all degrees"],
    ["all,similar", "all degrees and near misses"], ["exact", "exact only"]]
    .map(([v, t]) => h("option", { value: v, text: t, selected: (query.get("match") || "exact,narrower") === v })));
  const policy = h("select", { name: "policy" }, ["least-load", "spillover", "round-robin", "limit"].map((p) =>
    h("option", { value: p, text: p, selected: (query.get("policy") || "least-load") === p })));
  const any = h("input", { type: "checkbox", name: "status", checked: query.get("status") === "any" });
  const terms = h("datalist", { id: "known-terms" });
  const box = errorBox();
  const out = h("div", { "aria-live": "polite" });
  main.append(h("h1", { text: "Discovery" }),
    h("form", { class: "filters", onsubmit: (e) => {
      e.preventDefault();
      const params = { s: inputs.s.value.trim(), p: inputs.p.value.trim(), o: inputs.o.value.trim(), match: match.value,
        policy: policy.value, status: any.checked ? "any" : "" };
      navigate(`#/discover${qs(params)}`);
    } },
    field("Subject", inputs.s), field("Predicate", inputs.p), field("Object", inputs.o), field("Match", match),
    field("Balancing policy", policy), h("label", { class: "inline" }, any, "include instances that are not up"),
    h("button", { type: "submit", class: "primary", text: "Discover" })), terms, box, out);
  fillTerms(terms).catch(() => {});
  if (!query.get("s")) {
    out.append(h("p", { class: "muted", text: "Ask in ontology terms, e.g. ex:Obra ex:temUmGenero ex:Terror: the reasoner expands the question over the class and property hierarchies." }));
    return;
  }
  const q = { s: query.get("s"), p: query.get("p"), o: query.get("o"), match: query.get("match") };
  try {
    const [found, why, pick] = await Promise.all([
      getJSON(`/v1/discover${qs({ ...q, status: query.get("status") })}`),
      getJSON(`/v1/expand${qs(q)}`),
      getJSON(`/v1/route/preview${qs({ ...q, policy: query.get("policy") })}`),
    ]);
    draw(out, found, why, pick);
  } catch (error) {
    showError(box, error);
  }
}

async function fillTerms(list) {
  const [concepts, tags] = await Promise.all([getJSON("/v1/concepts"), getJSON("/v1/tags")]);
  const seen = new Set(Object.keys(knownPrefixes()).map((p) => `${p}:`));
  for (const c of concepts.concepts) seen.add(curie(c.iri));
  for (const t of tags.tags) for (const x of [t.s, t.p, t.o]) seen.add(curie(x));
  seen.add("a");
  clear(list, [...seen].sort().map((v) => h("option", { value: v })));
}

function key(tag) { return `${tag.s} ${tag.p} ${tag.o}`; }

function draw(out, found, expand, pick) {
  const reasons = new Map(expand.tags.map((t) => [key(t.tag), t.why]));
  const views = new Map(found.instances.map((i) => [i.id, i]));
  const groups = DEGREES.map((d) => [d, found.matches.filter((m) => m.degree === d)]).filter(([, ms]) => ms.length);
  clear(out,
    h("section", { class: "card pick", "aria-labelledby": "pick-title", "data-testid": "pick" },
      h("h2", { id: "pick-title", text: `The balancer would pick now (${pick.policy}${pick.limit ? ", capacity limit" : ""})` }),
      pick.instance ? h("p", {}, h("a", { href: `#/instances/${encodeURIComponent(pick.instance.id)}`, class: "mono", text: pick.instance.id }),
        ` at ${pick.instance.scheme}://${pick.instance.address}:${pick.instance.port}, among ${pick.candidates.length} up: `,
        pick.candidates.map((c, n) => `${n ? ", " : ""}${c.id} (load ${c.effective_load}, weight ${c.weight}${c.capacity ? `, capacity ${c.capacity}` : ""})`).join(""))
        : h("p", { class: "muted", text: "No instance is eligible: a route would answer 503." })),
    h("p", { class: "muted", text: `${found.instances.length} instances, ${found.matches.length} matched tags${found.truncated ? " (the best 1,000 listed)" : ""}.` }),
    groups.length === 0 ? h("p", { text: "No registered tag matches." }) : groups.map(([degree, matches]) =>
      h("section", { class: "degree-group", "aria-labelledby": `deg-${degree}`, "data-degree": degree },
        h("h2", { id: `deg-${degree}`, text: `${degree} (${matches.length})` }),
        h("ul", { class: "plain" }, matches.map((m) => h("li", { class: "card", "data-testid": "match" },
          h("p", {}, tagLinks(m.tag), m.degree === "similar" ? ` · similarity ${m.similarity}` : ` · distance ${m.distance}`),
          h("p", {}, "instances: ", m.instances.map((ref, n) => [n ? ", " : "",
            h("a", { href: `#/instances/${encodeURIComponent(ref.id)}`, text: ref.id }),
            views.get(ref.id) ? ` (${views.get(ref.id).status})` : ""])),
          explanation(reasons.get(key(m.tag)))))))));
}

function explanation(why) {
  if (!why) return null;
  return h("div", {}, h("h3", { text: "Why it matched" }), h("ul", { class: "plain", "data-testid": "why" },
    Object.entries(why).map(([k, c]) => h("li", { class: "chain" }, h("strong", { text: `${COMPONENT[k]}:` }), " ", describe(c)))));
}

function describe(c) {
  if (c.degree === null) return c.similar ? near(c.similar) : h("span", { text: "no relation" });
  if (c.wildcard) return h("span", { text: c.degree === "exact" ? "any on both sides" : c.degree === "narrower" ? "any was asked" : "the tag says any" });
  if (c.steps.length === 0) return h("span", { text: "the same term" });
  const out = [termLink(c.steps[0].s)];
  for (const step of c.steps) {
    out.push(" ", h("span", { class: "rel", text: `${RELATION[step.p] || curie(step.p)}${step.asserted ? "" : " (entailed)"}` }), " ", termLink(step.o));
  }
  return h("span", { class: "chain" }, out, " ", h("span", { class: "muted", text: `(${c.degree}, ${c.steps.length} step${c.steps.length === 1 ? "" : "s"})` }));
}

function near(close) {
  const words = close.shared_words.length ? `shares the words ${close.shared_words.join(", ")}` : "shares no word";
  const above = close.common_ancestor ? [", both below ", termLink(close.common_ancestor)] : [", no common ancestor"];
  return h("span", { class: "chain" }, `close in meaning: ${words}`, above, " ",
    h("span", { class: "muted", text: `(similar ${close.similarity}: words ${close.text}, structure ${close.structure})` }));
}
