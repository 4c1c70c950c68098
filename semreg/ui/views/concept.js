// One concept: kind, label, parents, children, ancestors, descendants, equivalents, and the
// instances whose tags mention it (GET /v1/instances?tag=, in every environment the token sees).
import { getJSON, qs } from "../api.js";
import { badge, clear, errorBox, h, showError, table } from "../dom.js";
import { curie, tagLinks, termLink } from "../terms.js";

const MOST = 1000;

// [{id, service, status, tag}] for each tag of each instance that names the term, at most MOST instances
// an environment.
async function mentioning(iri, environments) {
  const lists = await Promise.all(environments.map((environment) =>
    getJSON(`/v1/instances${qs({ tag: `<${iri}>`, environment, limit: MOST })}`)));
  return lists.flat().flatMap((i) => i.tags.filter((t) => [t.s, t.p, t.o].includes(iri))
    .map((tag) => ({ id: i.id, service: i.service, status: i.status, tag })));
}

export async function render(main, { params, principal }) {
  const [iri] = params;
  const c = await getJSON(`/v1/concepts/${encodeURIComponent(iri)}`);
  const related = (title, list) => h("section", { "aria-label": title }, h("h2", { text: `${title} (${list.length})` }),
    list.length === 0 ? h("p", { class: "muted", text: "none" })
      : h("ul", { class: "plain", "data-testid": title.toLowerCase() }, list.map((x) => h("li", {}, termLink(x)))));
  const instances = h("div", { "aria-live": "polite" }, h("p", { class: "muted", text: "Looking for instances…" }));
  const box = errorBox();
  main.append(h("h1", {}, h("span", { class: "mono", text: curie(c.iri) }), c.label ? ` · ${c.label}` : ""),
    h("dl", { class: "fields" }, h("dt", { text: "IRI" }), h("dd", { class: "mono", text: c.iri }),
      h("dt", { text: "kind" }), h("dd", { text: c.kind })),
    h("div", { class: "grid" }, related("Parents", c.parents), related("Children", c.children),
      related("Equivalents", c.equivalents), related("Ancestors", c.ancestors), related("Descendants", c.descendants)),
    h("section", { "aria-labelledby": "mention-title" }, h("h2", { id: "mention-title", text: "Instances whose tags mention it" }), box, instances),
    h("p", {}, h("a", { href: `#/discover?s=${encodeURIComponent(curie(c.iri))}`, text: "Discover by this concept" })));
  try {
    const rows = await mentioning(c.iri, principal.environments || ["*"]);
    clear(instances, rows.length === 0 ? h("p", { class: "muted", text: "No registered tag names it." })
      : table(["instance", "service", "status", "tag"], rows.map((r) => h("tr", {},
        h("td", {}, h("a", { href: `#/instances/${encodeURIComponent(r.id)}`, text: r.id })), h("td", { text: r.service }),
        h("td", {}, badge(r.status)), h("td", {}, tagLinks(r.tag))))));
  } catch (error) {
    clear(instances);
    showError(box, error);
  }
}
