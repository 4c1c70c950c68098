// Ontologies: the uploaded ones (live), each one's source as Turtle on request, upload by file picker
// or drag and drop with the parser's error shown at its line, delete (confirmed), and the class and
// property tree of the hierarchy with a search. The class tree is rooted at owl:Thing, as a person
// reading OWL expects (every class is one); owl:Nothing, the class no individual can be in, comes last.
import { getJSON, request } from "../api.js";
import { clear, confirmAction, errorBox, field, h, showError, table, time } from "../dom.js";
import { curie } from "../terms.js";

let fileTypes = null;
const OWL_THING = "http://www.w3.org/2002/07/owl#Thing";
const OWL_NOTHING = "http://www.w3.org/2002/07/owl#Nothing";
const SOURCE_SHOWN = 200_000;  // characters of a source shown on the page; the download has all of it

export async function render(main, { live, may }) {
  fileTypes = fileTypes || await getJSON("/ui/file-types.json");
  const listBox = h("div");
  const listError = errorBox();
  const treeBox = h("div", { class: "tree" });
  const search = h("input", { type: "search", name: "concept-search", placeholder: "label, CURIE or IRI", autocomplete: "off" });
  const found = h("div", { "aria-live": "polite" });
  const sourceBox = h("div", { "data-testid": "source" });
  main.append(h("h1", { text: "Ontologies" }), listError, listBox, sourceBox);
  if (may("admin")) main.append(uploader());
  main.append(h("section", { "aria-labelledby": "tree-title" },
    h("h2", { id: "tree-title", text: "Classes and properties" }),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() }, field("Search concepts", search)),
    found, treeBox));

  function drawList() {
    const list = live.ontologies;
    if (list === null) return;
    clear(listBox, list.length === 0 ? h("p", { class: "muted", text: "No ontology is uploaded." })
      : table(["name", { label: "triples", num: true }, { label: "inferred", num: true }, "uploaded", "media type", "actions"],
        list.map((o) => h("tr", { dataset: { name: o.name } }, h("td", { text: o.name }), h("td", { class: "num", text: o.triples }),
          h("td", { class: "num", text: o.inferred }), h("td", {}, time(o.uploaded_at)), h("td", { class: "mono", text: o.media_type }),
          h("td", { class: "actions" }, h("button", { type: "button", "aria-label": `Source of ${o.name}`, text: "Source",
            onclick: () => showSource(o.name).catch((error) => showError(listError, error)) }),
          may("admin") ? h("button", { type: "button", class: "danger", "aria-label": `Delete ${o.name}`, text: "Delete",
            onclick: async () => {
              if (!(await confirmAction(`Delete ${o.name}?`, "Its triples leave the closure; discovery reasons without them at once.", "Delete"))) return;
              showError(listError, null);
              try { await request(`/v1/ontologies/${encodeURIComponent(o.name)}`, { method: "DELETE" }); } catch (error) { showError(listError, error); }
            } }) : null)))));
  }

  // An ontology's triples as Turtle (as stored: the uploaded statements, not the inferred ones), with a
  // download of the whole text.
  async function showSource(name) {
    const text = await (await request(`/v1/ontologies/${encodeURIComponent(name)}`, { headers: { Accept: "text/turtle" } })).text();
    const blob = URL.createObjectURL(new Blob([text], { type: "text/turtle" }));
    const cut = text.length > SOURCE_SHOWN;
    const titleId = "source-title";
    clear(sourceBox, h("section", { "aria-labelledby": titleId },
      h("div", { class: "row" }, h("h2", { id: titleId, text: `Source of ${name}` }),
        h("a", { href: blob, download: `${name}.ttl`, text: "Download Turtle" }),
        h("button", { type: "button", text: "Close", onclick: () => { URL.revokeObjectURL(blob); clear(sourceBox); } })),
      cut ? h("p", { class: "muted", text: `The first ${SOURCE_SHOWN} of ${text.length} characters; the download has all.` }) : null,
      h("pre", { class: "source", tabindex: "0", "aria-label": `Turtle of ${name}`, text: cut ? text.slice(0, SOURCE_SHOWN) : text })));
    sourceBox.querySelector("h2").scrollIntoView?.({ block: "nearest" });
  }

  let concepts = [];
  async function drawTree() {
    concepts = (await getJSON("/v1/concepts")).concepts;
    const byIri = new Map(concepts.map((c) => [c.iri, c]));
    const children = new Map();
    for (const c of concepts) for (const p of c.parents) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(c);
    }
    const label = (c) => c.label ? `${curie(c.iri)} · ${c.label}` : curie(c.iri);
    const node = (c, path, depth) => {
      const kids = (children.get(c.iri) || []).filter((k) => !path.has(k.iri));
      const link = h("a", { href: `#/concepts/${encodeURIComponent(c.iri)}`, title: c.iri, text: label(c) });
      if (kids.length === 0) return h("li", { class: "leaf" }, link, c.kind === "individual" ? h("span", { class: "kind", text: " individual" }) : null);
      const next = new Set(path).add(c.iri);
      const open = depth < (byIri.has(OWL_THING) ? 2 : 1);  // the level below owl:Thing open, as the roots were
      const list = h("ul", { hidden: !open }, kids.sort(byLabel).map((k) => node(k, next, depth + 1)));
      const toggle = h("button", { type: "button", class: "toggle", "aria-expanded": String(open),
        "aria-label": `${curie(c.iri)}: ${kids.length} below`, text: open ? "▾" : "▸", onclick: () => {
          const opened = list.hidden;
          list.hidden = !opened;
          toggle.setAttribute("aria-expanded", String(opened));
          toggle.textContent = opened ? "▾" : "▸";
        } });
      return h("li", {}, toggle, " ", link, h("span", { class: "kind", text: ` ${kids.length}` }), list);
    };
    const roots = (kind) => concepts.filter((c) => c.kind === kind && !c.parents.some((p) => byIri.has(p))).sort(byLabel);
    // owl:Thing holds every class: the classes with no other parent hang below it, and owl:Nothing goes last
    const thing = byIri.get(OWL_THING);
    let classRoots = roots("class").filter((c) => c.iri !== OWL_NOTHING);
    if (thing) {
      const below = classRoots.filter((c) => c.iri !== OWL_THING);
      children.set(OWL_THING, [...(children.get(OWL_THING) || []).filter((c) => c.iri !== OWL_NOTHING),
        ...below.filter((c) => !(children.get(OWL_THING) || []).includes(c))]);
      classRoots = [thing];
    }
    const nothing = byIri.get(OWL_NOTHING);
    for (const list of children.values()) {
      const at = list.findIndex((c) => c.iri === OWL_NOTHING);
      if (at >= 0) list.splice(at, 1);
    }
    const nothingItem = nothing ? h("li", { class: "leaf nothing" },
      h("a", { href: `#/concepts/${encodeURIComponent(nothing.iri)}`, title: nothing.iri, text: curie(nothing.iri) }),
      h("span", { class: "kind", text: " the empty class" })) : null;
    clear(treeBox, concepts.length === 0 ? h("p", { class: "muted", text: "The hierarchy is empty: upload an ontology." }) : [
      h("h3", { text: "Classes" }), h("ul", { "aria-label": "Class tree" }, classRoots.map((c) => node(c, new Set(), 0)), nothingItem),
      h("h3", { text: "Properties" }), h("ul", { "aria-label": "Property tree" }, roots("property").map((c) => node(c, new Set(), 0)))]);
    filter();
  }

  function filter() {
    const text = search.value.trim().toLowerCase();
    if (!text) { clear(found); treeBox.hidden = false; return; }
    const hits = concepts.filter((c) => c.iri.toLowerCase().includes(text) || curie(c.iri).toLowerCase().includes(text)
      || (c.label || "").toLowerCase().includes(text)).slice(0, 200);
    treeBox.hidden = true;
    clear(found, h("p", { class: "muted", text: `${hits.length === 200 ? "The first 200" : hits.length} concepts match.` }),
      h("ul", { class: "plain" }, hits.map((c) => h("li", {}, h("a", { href: `#/concepts/${encodeURIComponent(c.iri)}`, title: c.iri, text: curie(c.iri) }),
        c.label ? ` · ${c.label}` : "", h("span", { class: "kind", text: ` ${c.kind}` })))));
  }
  search.addEventListener("input", filter);

  drawList();
  await drawTree();
  const redraw = (event) => {
    if (event.detail !== "ontologies") return;
    drawList();
    drawTree().catch((error) => showError(listError, error));
  };
  live.addEventListener("change", redraw);
  return () => live.removeEventListener("change", redraw);
}

function byLabel(a, b) { return curie(a.iri).localeCompare(curie(b.iri)); }

function uploader() {
  const name = h("input", { name: "ontology-name", id: "ontology-name", pattern: "[A-Za-z0-9._\\-]{1,128}", placeholder: "from the file name" });
  const file = h("input", { type: "file", name: "ontology-file", id: "ontology-file",
    accept: Object.keys(fileTypes).join(",") });
  const box = errorBox();
  const excerpt = h("div", { "data-testid": "upload-excerpt" });
  const done = h("p", { class: "note", role: "status" });
  const zone = h("div", { class: "drop", "data-testid": "drop-zone" }, "Drop an ontology file here, or choose one: ", file);

  async function upload(chosen) {
    showError(box, null);
    clear(excerpt);
    done.textContent = "";
    const suffix = chosen.name.includes(".") ? chosen.name.slice(chosen.name.lastIndexOf(".")).toLowerCase() : "";
    const type = fileTypes[suffix];
    if (!type) {
      showError(box, { message: `${chosen.name}: the suffix '${suffix}' is not one of ${Object.keys(fileTypes).join(" ")}.` });
      return;
    }
    const target = name.value.trim() || chosen.name.slice(0, chosen.name.length - suffix.length).replace(/[^A-Za-z0-9._-]/g, "-");
    const text = await chosen.text();
    try {
      const answer = await (await request(`/v1/ontologies/${encodeURIComponent(target)}`,
        { method: "PUT", body: text, headers: { "Content-Type": type } })).json();
      done.textContent = `${answer.name}: ${answer.triples} triples, ${answer.inferred} inferred, ${answer.concepts} concepts (${answer.ms} ms).`;
    } catch (error) {
      showError(box, error);
      if (error.body?.line) excerpt.append(lines(text, error.body.line, error.body.column, chosen.name));
    }
  }
  file.addEventListener("change", () => { if (file.files[0]) upload(file.files[0]); });
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    if (e.dataTransfer.files[0]) upload(e.dataTransfer.files[0]);
  });
  return h("section", { "aria-labelledby": "upload-title" }, h("h2", { id: "upload-title", text: "Upload" }),
    h("div", { class: "row" }, h("label", { for: "ontology-name" }, "Name (replaces an ontology of that name)", name)),
    h("label", { for: "ontology-file", class: "inline" }, "Ontology file"), zone, box, excerpt, done);
}

// The lines around the one the parser stopped at, that one marked.
function lines(text, line, column, fileName) {
  const all = text.split("\n");
  const from = Math.max(1, line - 3);
  const to = Math.min(all.length, line + 2);
  const out = [];
  for (let n = from; n <= to; n += 1) {
    const content = h("span", {}, h("span", { class: "ln", text: n }), all[n - 1] ?? "");
    out.push(n === line ? h("mark", { "data-testid": "error-line" }, content) : h("span", { style: null }, content, "\n"));
  }
  return h("figure", { class: "excerpt" }, h("figcaption", { class: "muted", text: `${fileName}, line ${line}${column ? `, column ${column}` : ""}:` }),
    h("pre", {}, out));
}
