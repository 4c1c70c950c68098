// One instance: its tags as CURIEs, health, load, weight, capacity, expiry, registration time; drain,
// block, resume and deregister (confirmed) for its owner or an admin. Read again when a live change
// names it.
import { getJSON, request } from "../api.js";
import { badge, clear, confirmAction, errorBox, h, showError, time } from "../dom.js";
import { tagLinks } from "../terms.js";

const ACTIONS = [
  { label: "Drain", status: "draining", when: (s) => s !== "draining", explain: "It keeps its lease and stays listed, but gets no new routes." },
  { label: "Block", status: "blocked", when: (s) => s !== "blocked", explain: "It gets no routes until it is resumed." },
  { label: "Resume", status: "up", when: (s) => s !== "up", explain: "It takes routes again (its lease is renewed)." },
];

export async function render(main, { live, params, mayChange, navigate }) {
  const [id] = params;
  const path = `/v1/instances/${encodeURIComponent(id)}`;
  const heading = h("h1", {}, "Instance ", h("span", { class: "mono", text: id }));
  const box = errorBox();
  const body = h("div");
  main.append(heading, box, body);

  function gone() {
    clear(body, h("p", {}, "This instance is not registered (any more). ", h("a", { href: "#/instances", text: "All instances" })));
  }

  async function load() {
    let inst;
    try {
      inst = await getJSON(path);
    } catch (error) {
      if (error.status === 404) { gone(); return; }
      throw error;
    }
    draw(inst);
  }

  async function act(label, text, send) {
    if (!(await confirmAction(`${label} ${id}?`, text, label))) return;
    showError(box, null);
    try {
      await send();
    } catch (error) {
      showError(box, error);
    }
  }

  function draw(inst) {
    const allowed = mayChange(inst);
    const check = inst.check ? (inst.check.http || inst.check.tcp) : null;
    clear(body,
      h("p", {}, badge(inst.status), " ", h("span", { "data-testid": "status", text: inst.status })),
      allowed ? h("div", { class: "actions", role: "group", "aria-label": "Actions" },
        ACTIONS.filter((a) => a.when(inst.status)).map((a) => h("button", { type: "button",
          onclick: () => act(a.label, a.explain, () => request(`${path}/heartbeat`, { method: "PUT", json: { status: a.status } })),
          text: a.label })),
        h("a", { href: `#/instances/${encodeURIComponent(id)}/edit`, class: "button", text: "Edit" }),
        h("button", { type: "button", class: "danger", text: "Deregister",
          onclick: () => act("Deregister", "It is removed from the registry; its service registers again to come back.", async () => {
            await request(path, { method: "DELETE" });
            navigate("#/instances");
          }) }))
        : h("p", { class: "muted", text: inst.owner ? `Registered by ${inst.owner}: only that token or an admin may change it.` : "This token may not change instances." }),
      h("div", { class: "columns" },
        h("section", { "aria-labelledby": "inst-fields" }, h("h2", { id: "inst-fields", text: "Registration" }),
          h("dl", { class: "fields" },
            row("service", h("a", { href: `#/instances?service=${encodeURIComponent(inst.service)}`, text: inst.service })),
            "environment" in inst ? row("environment", inst.environment) : null,
            row("address", h("span", { class: "mono", text: `${inst.scheme}://${inst.address}:${inst.port}` })),
            row("health", inst.status === "critical" ? "failing: its lease ran out or its check failed" : check ? `check ${check} passing` : "lease held"),
            check ? row("check", `every ${inst.check.interval ?? 10} s, timeout ${inst.check.timeout ?? 2} s`) : null,
            row("load", String(inst.load)), row("weight", String(inst.weight)),
            row("capacity", inst.capacity ?? "none"), row("ttl", inst.ttl ? `${inst.ttl} s` : "0 (never expires)"),
            row("expires", time(inst.expires_at)), row("registered", time(inst.registered_at)),
            row("deregister after", inst.deregister_after ? `${inst.deregister_after} s without a heartbeat` : "never"),
            inst.owner ? row("owner", inst.owner) : null,
            Object.keys(inst.meta).length ? row("meta", h("ul", { class: "plain mono" },
              Object.entries(inst.meta).map(([k, v]) => h("li", { text: `${k}=${v}` })))) : null)),
        h("section", { "aria-labelledby": "inst-tags" }, h("h2", { id: "inst-tags", text: `Tags (${inst.tags.length})` }),
          inst.tags.length === 0 ? h("p", { class: "muted", text: "No tags." })
            : h("ul", { class: "plain", "data-testid": "tags" }, inst.tags.map((t) => h("li", {}, tagLinks(t)))))));
  }

  await load();
  const redraw = (event) => {
    if (event.detail !== "instances") return;
    const mine = live.latest === null ? null : live.latest.filter((c) => c.id === id);
    if (mine !== null && mine.length === 0) return;
    if (mine !== null && mine[mine.length - 1].status === null) gone();  // removed: nothing to read
    else load().catch((error) => showError(box, error));
  };
  live.addEventListener("change", redraw);
  return () => live.removeEventListener("change", redraw);
}

function row(label, value) {
  return [h("dt", { text: label }), h("dd", {}, value)];
}
