// Services and instances: one page of fifty at a time, each row with its first tags, health and expiry,
// read from the server (GET /v1/instances with limit and offset, in id order), filtered there by service,
// status, tag (a term in any position, or a whole tag, CURIE or IRI) and environment, with the total from
// X-Semreg-Total. Live changes touch only the page: a status change of a row shown redraws its badge (to or
// from critical, reads the page again, for the health cell's why); a registration or removal that the
// filters may admit (or any change under a status filter) reads the page again.
import { request, qs } from "../api.js";
import { badge, clear, errorBox, field, h, showError, table, time } from "../dom.js";
import { touches } from "../live.js";
import { tagText } from "../terms.js";

const PAGE = 50;
const TAGS_SHOWN = 3;
const HEALTH_SHOWN = 60;  // characters of a row's health; a probe's error can run to 200  // a row shows its first tags; the instance's page shows them all
const STATUSES = ["", "up", "draining", "blocked", "critical"];

export async function render(main, { live, query, may, navigate, principal }) {
  const bound = principal.environments || null;  // a bound token reads one of its environments at a time
  const state = { service: query.get("service") || "", tag: query.get("tag") || "", status: query.get("status") || "",
    environment: query.get("environment") || (bound ? bound[0] : ""), page: Math.max(1, Number(query.get("page")) || 1) };
  let rows = null;
  let total = 0;
  const box = errorBox();
  const tagError = errorBox();
  const service = h("input", { name: "service", list: "services-list", value: state.service, autocomplete: "off" });
  const tag = h("input", { name: "tag", value: state.tag, placeholder: "ex:Livro or ex:Livro ex:temUmGenero ex:Terror",
    size: 36, "aria-describedby": "tag-hint" });
  const status = h("select", { name: "status" }, STATUSES.map((s) => h("option", { value: s, selected: s === state.status, text: s || "any" })));
  const environment = h("select", { name: "environment" });
  const datalist = h("datalist", { id: "services-list" });
  const summary = h("p", { class: "muted", "aria-live": "polite", "data-testid": "summary" });
  const body = h("div", { class: "scroll" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const form = h("form", { class: "filters", role: "search", onsubmit: (event) => { event.preventDefault(); apply(); } },
    field("Service", service), field("Tag", tag), field("Status", status), field("Environment", environment),
    h("button", { type: "submit", class: "primary", text: "Search" }),
    h("button", { type: "button", onclick: () => { service.value = ""; tag.value = ""; status.value = ""; environment.value = bound ? bound[0] : ""; apply(); }, text: "Clear" }));
  main.append(h("div", { class: "row" }, h("h1", { text: "Instances" }),
    may("write") ? h("a", { href: "#/register", text: "Register an instance" }) : null),
  form, h("p", { id: "tag-hint", class: "muted", text: "A tag filter lists the instances whose tags mention the term in any position, or carry that whole tag." }),
  tagError, box, datalist, summary, body, pager);

  function environments() {
    const known = bound || ["", ...Object.keys(live.summary ? live.summary.environments : {})];
    const names = known.includes(state.environment) ? known : [...known, state.environment];
    clear(environment, names.map((name) => h("option", { value: name, selected: name === state.environment, text: name || "all" })));
    clear(datalist, live.services().map(([name]) => h("option", { value: name })));
  }

  function apply() {
    const params = new URLSearchParams();
    if (service.value.trim()) params.set("service", service.value.trim());
    if (tag.value.trim()) params.set("tag", tag.value.trim());
    if (status.value) params.set("status", status.value);
    if (environment.value && environment.value !== (bound ? bound[0] : "")) params.set("environment", environment.value);
    navigate(`#/instances${params.toString() ? `?${params}` : ""}`);
  }

  function go(page) {
    state.page = page;
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    params.set("page", page);
    history.replaceState(null, "", `#/instances?${params}`);
    reload().then(() => body.querySelector("a")?.focus());
  }

  // One page read at a time; a change seen meanwhile reads it once more after it.
  let reading = null;
  let again = false;
  function reload() {
    if (reading) { again = true; return reading; }
    reading = (async () => {
      do {
        again = false;
        await read();
      } while (again);
    })().finally(() => { reading = null; });
    return reading;
  }

  async function read() {
    const params = { limit: PAGE, offset: (state.page - 1) * PAGE, service: state.service, tag: state.tag,
      status: state.status, environment: state.environment || "*" };
    try {
      const response = await request(`/v1/instances${qs(params)}`);
      rows = await response.json();
      total = Number(response.headers.get("X-Semreg-Total"));
      showError(box, null);
    } catch (error) {
      if (error.status === 400 && error.body.field === "tag") {
        showError(tagError, error);
        tag.setAttribute("aria-invalid", "true");
      } else {
        showError(box, error);
      }
      rows = [];
      total = 0;
    }
    const pages = Math.max(1, Math.ceil(total / PAGE));
    if (state.page > pages) {
      state.page = pages;
      await read();
      return;
    }
    draw();
  }

  function draw() {
    const pages = Math.max(1, Math.ceil(total / PAGE));
    const first = (state.page - 1) * PAGE;
    const environments = rows.some((i) => "environment" in i);
    summary.textContent = total === 0 ? "No instance matches." : `${total} instances; ${first + 1}–${first + rows.length} shown.`;
    const headers = ["id", "service", ...(environments ? ["environment"] : []), "address", "status", "health", "tags",
      "expires", { label: "load", num: true }, { label: "weight", num: true }, { label: "capacity", num: true }];
    clear(body, table(headers, rows.map((i) => h("tr", { dataset: { id: i.id } },
      h("td", {}, h("a", { href: `#/instances/${encodeURIComponent(i.id)}`, text: i.id })),
      h("td", { text: i.service }), environments ? h("td", { text: i.environment ?? "" }) : null,
      h("td", { class: "mono", text: `${i.scheme}://${i.address}:${i.port}` }), h("td", {}, badge(i.status)),
      healthCell(health(i)), h("td", { class: "tags" }, tags(i)),
      h("td", {}, i.ttl ? time(i.expires_at) : h("span", { class: "muted", text: "no lease" })),
      h("td", { class: "num", text: i.load }), h("td", { class: "num", text: i.weight }),
      h("td", { class: "num", text: i.capacity ?? "" })))));
    const pageInput = h("input", { type: "number", min: 1, max: pages, value: state.page, size: 6, name: "page" });
    clear(pager, h("button", { type: "button", disabled: state.page <= 1, onclick: () => go(state.page - 1), text: "Previous" }),
      h("form", { class: "row", onsubmit: (event) => { event.preventDefault(); go(Math.min(pages, Math.max(1, Number(pageInput.value) || 1))); } },
        h("label", { class: "inline" }, "Page", pageInput, `of ${pages}`), h("button", { type: "submit", text: "Go" })),
      h("button", { type: "button", disabled: state.page >= pages, onclick: () => go(state.page + 1), text: "Next" }));
  }

  // What the live changes do to the page: nothing, a badge, or a read of the page.
  function changed() {
    if (live.latest === null) { reload(); return; }
    const shown = new Map(rows.map((i) => [i.id, i]));
    let redraw = false;
    for (const c of live.latest) {
      if (touches(c, { ...state, environment: state.environment })) { reload(); return; }
      const row = shown.get(c.id);
      // to or from critical: its health cell says why, which only a read tells
      if (row && c.status !== null && row.status !== c.status && (c.status === "critical" || row.status === "critical")) { reload(); return; }
      if (row && c.status !== null && row.status !== c.status) { row.status = c.status; redraw = true; }
    }
    if (redraw) draw();
  }

  environments();
  summary.textContent = "Reading the instances…";
  await reload();
  const redraw = (event) => {
    if (event.detail === "summary") environments();
    else if (event.detail === "instances" && rows !== null) changed();
  };
  live.addEventListener("change", redraw);
  return () => live.removeEventListener("change", redraw);
}

// Why a row is critical, or how its check last went, in a few words.
function health(i) {
  if (i.status === "critical") {
    const why = [];
    if (i.critical?.check_failing) why.push(`check failing${i.last_check ? `: ${i.last_check.output}` : ""}`);
    if (i.critical?.lease_lapsed) why.push("lease lapsed");
    if (i.critical?.reported) why.push("reported critical");
    return why.join("; ") || "lease lapsed or check failing";
  }
  if (i.last_check) return i.last_check.passing ? "check passing" : `check failing: ${i.last_check.output}`;
  return i.check ? "check not run yet" : i.ttl ? "lease held" : "no check, no lease";
}

// A long probe error cut to a line; all of it on hover and on the instance's page.
function healthCell(text) {
  const cut = text.length > HEALTH_SHOWN;
  return h("td", { class: "health", title: cut ? text : null, text: cut ? `${text.slice(0, HEALTH_SHOWN - 1)}…` : text });
}

function tags(i) {
  const list = i.tags || [];
  if (list.length === 0) return h("span", { class: "muted", text: "none" });
  return h("ul", { class: "plain mono" }, list.slice(0, TAGS_SHOWN).map((t) => h("li", { text: tagText(t) })),
    list.length > TAGS_SHOWN ? h("li", { class: "muted", text: `and ${list.length - TAGS_SHOWN} more` }) : null);
}
