// The SPARQL console: an editor with highlighting and prefix completion (CodeMirror, bundled in
// vendor/editor.js), the example queries of queries/ one click away, results as a table, and the
// same query downloaded as CSV or JSON.
import { getJSON, sparql } from "../api.js";
import { clear, errorBox, h, showError } from "../dom.js";
import { curie, knownPrefixes } from "../terms.js";

const DEFAULT = `PREFIX sr: <https://w3id.org/semreg#>
SELECT ?id ?service ?status WHERE {
  ?i a sr:Instance ; sr:id ?id ; sr:service ?service ; sr:status ?status .
}
ORDER BY ?id
LIMIT 100`;
let lastQuery = null;

export async function render(main) {
  const { createEditor, getText, setText } = await import("../vendor/editor.js");
  const examples = await getJSON("/ui/queries.json");
  const host = h("div", { class: "editor", id: "sparql-editor" });
  const box = errorBox();
  const out = h("div", { "aria-live": "polite" });
  const downloads = h("div", { class: "actions" });
  const run = async () => {
    showError(box, null);
    clear(downloads);
    const text = getText(editor);
    lastQuery = text;
    const started = performance.now();
    try {
      const response = await sparql(text, { accept: "application/sparql-results+json, text/turtle;q=0.9" });
      const type = response.headers.get("content-type") || "";
      const ms = Math.round(performance.now() - started);
      if (type.includes("sparql-results+json")) {
        const body = await response.json();
        drawResults(out, body, ms);
        if (body.results) {
          downloads.append(download(text, "text/csv", "results.csv", "Download CSV"),
            download(text, "application/sparql-results+json", "results.json", "Download JSON"));
        }
      } else {
        clear(out, h("p", { class: "muted", text: `${type.split(";")[0]}, ${ms} ms` }), h("pre", { text: await response.text() }));
      }
    } catch (error) {
      clear(out);
      showError(box, error);
    }
  };
  const editor = createEditor(host, { doc: lastQuery ?? DEFAULT, label: "SPARQL query", prefixes: knownPrefixes, onRun: run });
  main.append(h("h1", { text: "SPARQL" }),
    h("section", { "aria-labelledby": "examples-title" }, h("h2", { id: "examples-title", text: "Examples" }),
      h("div", { class: "actions" }, examples.map((q) => h("button", { type: "button", title: firstComment(q.query),
        onclick: () => { setText(editor, q.query); editor.focus(); }, text: q.name.replace(/\.rq$/, "") })))),
    h("p", { id: "editor-help", class: "muted", text: "Ctrl+Enter runs the query; Ctrl+Space completes prefixes and keywords. The server's prefixes are known without PREFIX lines." }),
    host, h("div", { class: "actions" }, h("button", { type: "button", class: "primary", onclick: run, text: "Run query" })),
    box, downloads, out);
  editor.contentDOM.setAttribute("aria-describedby", "editor-help");
  return () => editor.destroy();
}

function firstComment(text) {
  return text.split("\n").filter((l) => l.startsWith("#")).map((l) => l.slice(1).trim()).join(" ");
}

function drawResults(out, body, ms) {
  if ("boolean" in body) {
    clear(out, h("p", { "data-testid": "ask", text: `ASK: ${body.boolean} (${ms} ms)` }));
    return;
  }
  const vars = body.head.vars;
  const rows = body.results.bindings;
  clear(out, h("p", { class: "muted", text: `${rows.length} rows, ${ms} ms` }),
    h("div", { class: "scroll" }, h("table", { "data-testid": "results" },
      h("thead", {}, h("tr", {}, vars.map((v) => h("th", { scope: "col", text: `?${v}` })))),
      h("tbody", {}, rows.map((b) => h("tr", {}, vars.map((v) => h("td", {}, cell(b[v])))))))));
}

function cell(term) {
  if (!term) return "";
  if (term.type === "uri") return h("span", { class: "mono", title: term.value, text: curie(term.value) });
  if (term.type === "bnode") return h("span", { class: "mono", text: `_:${term.value}` });
  return h("span", { title: term.datatype || term["xml:lang"] || null, text: term.value });
}

function download(query, accept, name, label) {
  return h("button", { type: "button", text: label, onclick: async (event) => {
    const button = event.currentTarget;
    try {
      const blob = await (await sparql(query, { accept })).blob();
      const a = h("a", { href: URL.createObjectURL(blob), download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (error) {
      button.after(h("span", { class: "bad", role: "alert", text: ` ${error.message}` }));
    }
  } });
}
