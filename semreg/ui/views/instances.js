// Services and instances: a table of the live list, searchable by service, tag (a term or a whole
// tag, CURIE or IRI) and status, fifty a page.
import { badge, clear, errorBox, field, h, showError, table } from "../dom.js";
import { mentioning, resolve } from "../mentions.js";

const PAGE = 50;
const STATUSES = ["", "up", "draining", "blocked", "critical"];

export async function render(main, { live, query, may, navigate }) {
  const state = { service: query.get("service") || "", tag: query.get("tag") || "", status: query.get("status") || "",
    page: Math.max(1, Number(query.get("page")) || 1) };
  let tagged = null;  // ids whose tags mention the tag filter, or null without one
  const tagError = errorBox();
  const service = h("input", { name: "service", list: "services-list", value: state.service, autocomplete: "off" });
  const tag = h("input", { name: "tag", value: state.tag, placeholder: "ex:Livro or ex:Livro ex:temUmGenero ex:Terror",
    size: 36, "aria-describedby": "tag-hint" });
  const status = h("select", { name: "status" }, STATUSES.map((s) => h("option", { value: s, selected: s === state.status, text: s || "any" })));
  const datalist = h("datalist", { id: "services-list" });
  const summary = h("p", { class: "muted", "aria-live": "polite", "data-testid": "summary" });
  const body = h("div", { class: "scroll" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const form = h("form", { class: "filters", role: "search", onsubmit: (event) => { event.preventDefault(); apply(); } },
    field("Service", service), field("Tag", tag), field("Status", status),
    h("button", { type: "submit", class: "primary", text: "Search" }),
    h("button", { type: "button", onclick: () => { service.value = ""; tag.value = ""; status.value = ""; apply(); }, text: "Clear" }));
  main.append(h("div", { class: "row" }, h("h1", { text: "Instances" }),
    may("write") ? h("a", { href: "#/register", text: "Register an instance" }) : null),
  form, h("p", { id: "tag-hint", class: "muted", text: "A tag filter lists the instances whose tags mention the term in any position, or carry that whole tag." }),
  tagError, datalist, summary, body, pager);

  function apply() {
    const params = new URLSearchParams();
    if (service.value.trim()) params.set("service", service.value.trim());
    if (tag.value.trim()) params.set("tag", tag.value.trim());
    if (status.value) params.set("status", status.value);
    navigate(`#/instances${params.toString() ? `?${params}` : ""}`);
  }

  function go(page) {
    state.page = page;
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    params.set("page", page);
    history.replaceState(null, "", `#/instances?${params}`);
    draw();
    body.querySelector("a")?.focus();
  }

  function rows() {
    return (live.instances || []).filter((i) => (!state.service || i.service === state.service)
      && (!state.status || i.status === state.status) && (!tagged || tagged.has(i.id)))
      .sort((a, b) => a.service.localeCompare(b.service) || a.id.localeCompare(b.id));
  }

  function draw() {
    clear(datalist, live.services().map(([name]) => h("option", { value: name })));
    if (live.instances === null) { summary.textContent = "Reading the instances…"; return; }
    const all = rows();
    const pages = Math.max(1, Math.ceil(all.length / PAGE));
    state.page = Math.min(state.page, pages);
    const shown = all.slice((state.page - 1) * PAGE, state.page * PAGE);
    const environments = shown.some((i) => "environment" in i);
    summary.textContent = all.length === 0 ? "No instance matches."
      : `${all.length} instances; ${(state.page - 1) * PAGE + 1}–${(state.page - 1) * PAGE + shown.length} shown.`;
    const headers = ["id", "service", ...(environments ? ["environment"] : []), "address", "status",
      { label: "load", num: true }, { label: "weight", num: true }, { label: "capacity", num: true }];
    clear(body, table(headers, shown.map((i) => h("tr", { dataset: { id: i.id } },
      h("td", {}, h("a", { href: `#/instances/${encodeURIComponent(i.id)}`, text: i.id })),
      h("td", { text: i.service }), environments ? h("td", { text: i.environment ?? "" }) : null,
      h("td", { class: "mono", text: `${i.scheme}://${i.address}:${i.port}` }), h("td", {}, badge(i.status)),
      h("td", { class: "num", text: i.load }), h("td", { class: "num", text: i.weight }),
      h("td", { class: "num", text: i.capacity ?? "" })))));
    const pageInput = h("input", { type: "number", min: 1, max: pages, value: state.page, size: 6, name: "page" });
    clear(pager, h("button", { type: "button", disabled: state.page <= 1, onclick: () => go(state.page - 1), text: "Previous" }),
      h("form", { class: "row", onsubmit: (event) => { event.preventDefault(); go(Math.min(pages, Math.max(1, Number(pageInput.value) || 1))); } },
        h("label", { class: "inline" }, "Page", pageInput, `of ${pages}`), h("button", { type: "submit", text: "Go" })),
      h("button", { type: "button", disabled: state.page >= pages, onclick: () => go(state.page + 1), text: "Next" }));
  }

  let term = null;
  async function findTagged() {
    try {
      term = term || await resolve(state.tag);
      tagged = new Set((await mentioning(term)).map((m) => m.id));
    } catch (error) {
      showError(tagError, error);
      tag.setAttribute("aria-invalid", "true");
      tagged = new Set();
    }
  }
  if (state.tag) await findTagged();
  draw();
  const redraw = async (event) => {
    if (event.detail !== "instances") return;
    if (state.tag && term) await findTagged();
    draw();
  };
  live.addEventListener("change", redraw);
  return () => live.removeEventListener("change", redraw);
}
