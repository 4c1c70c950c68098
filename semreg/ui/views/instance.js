// One instance: why it is in the state it is (which check failed, how and when, or when its lease
// lapsed), its tags as CURIEs, load, weight, capacity, expiry, registration time; drain,
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
      h("p", {}, statusBadge(inst.status)),
      health(inst),
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
            row("lease", inst.ttl ? `ttl ${inst.ttl} s: critical without a heartbeat within it` : "none (ttl 0): registered until deregistered"),
            check ? row("check", h("span", {}, h("span", { class: "mono", text: `${checkKind(inst.check)} ${check}` }),
              `, every ${inst.check.interval ?? 10} s, timeout ${inst.check.timeout ?? 2} s`)) : row("check", "none"),
            row("load", String(inst.load)), row("weight", String(inst.weight)),
            row("capacity", inst.capacity ?? "none"),
            row(inst.status === "critical" && inst.critical?.lease_lapsed ? "lease lapsed" : "expires",
              inst.ttl ? time(inst.expires_at) : "never (no lease)"),
            row("registered", time(inst.registered_at)),
            row("deregister after", inst.deregister_after
              ? `${inst.deregister_after} s past its last heartbeat or passing check, once critical`
              : "never: a critical instance stays until it recovers or is deregistered"),
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

function statusBadge(status) {
  const b = badge(status);
  b.setAttribute("data-testid", "status");
  return b;
}

function checkKind(check) { return "http" in check ? "HTTP" : "TCP"; }

// Why the instance is in the state it is: for a critical one which of its lease and its check failed,
// how and when, and when it is deleted; for another, its check's last result.
function health(inst) {
  const last = inst.last_check;
  const target = inst.check ? `${checkKind(inst.check)} ${inst.check.http || inst.check.tcp}` : null;
  const lastText = last ? h("span", {}, h("span", { class: "mono", "data-testid": "check-output", text: last.output }), " at ", time(last.at)) : null;
  if (inst.status !== "critical") {
    return h("section", { class: "health", "aria-labelledby": "inst-health" }, h("h2", { id: "inst-health", text: "Health" }),
      h("p", { "data-testid": "health" }, target
        ? [`Its check (${target}) `, last ? ["passed: ", lastText] : "has not run yet."]
        : inst.ttl ? "Its lease is held: heartbeats arrive within its ttl." : "No check and no lease: it is up until deregistered."));
  }
  const why = inst.critical || { lease_lapsed: false, check_failing: false, since: null, delete_at: null };
  const reasons = [];
  if (why.check_failing) {
    reasons.push(h("li", {}, `Its check failed: ${target ?? "the check"}`, last ? [" answered ", lastText] : "", "."));
  }
  if (why.lease_lapsed) {
    reasons.push(h("li", {}, `Its lease lapsed: no heartbeat within its ttl of ${inst.ttl} s; it ran out at `, time(inst.expires_at), "."));
  }
  if (why.reported) {
    reasons.push(h("li", { text: "The service reported itself critical (its Consul TTL check failed)." }));
  }
  if (reasons.length === 0) reasons.push(h("li", { text: "Its lease ran out or its check failed (the node answering holds no detail)." }));
  return h("section", { class: "health critical", "aria-labelledby": "inst-health" },
    h("h2", { id: "inst-health", text: "Why it is critical" }),
    h("ul", { "data-testid": "why-critical" }, reasons),
    h("p", { "data-testid": "critical-since" }, why.since ? ["Critical since ", time(why.since), ". "] : null,
      why.delete_at ? ["Deleted at ", time(why.delete_at), " unless it recovers."]
        : inst.deregister_after ? `Deleted ${inst.deregister_after} s past its last heartbeat unless it recovers.`
          : "It stays listed until it recovers or is deregistered."),
    h("p", { class: "muted", text: why.reported ? "A passing TTL check update (or a heartbeat with status up) brings it back."
      : why.lease_lapsed ? "A heartbeat brings it back." : "A passing check brings it back." }));
}

function row(label, value) {
  return [h("dt", { text: label }), h("dd", {}, value)];
}
