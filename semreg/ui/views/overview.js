// Overview: services, instances by status and by environment, ontologies and concepts (the counts of
// GET /v1/summary), the failing instances by service (a page of the critical ones), cluster members and
// the ring checksum, recent changes; each card redrawn when the live state it shows changes.
import { qs, request } from "../api.js";
import { badge, clear, h, table, time } from "../dom.js";

const FAILING_SHOWN = 100;  // critical instances read for the failing card: the first, by id
const IDS_PER_SERVICE = 5;

export function render(main, { live, principal }) {
  const cards = {
    instances: h("section", { class: "card", "aria-labelledby": "ov-instances" }),
    failing: h("section", { class: "card span2", "aria-labelledby": "ov-failing", "data-testid": "failing" }),
    services: h("section", { class: "card", "aria-labelledby": "ov-services" }),
    ontologies: h("section", { class: "card", "aria-labelledby": "ov-ontologies" }),
    cluster: h("section", { class: "card span2", "aria-labelledby": "ov-cluster" }),
    changes: h("section", { class: "card wide", "aria-labelledby": "ov-changes" }),
  };
  main.append(h("h1", { text: "Overview" }), h("div", { class: "grid" }, Object.values(cards)));

  const draw = {
    instances() {
      const counts = live.byStatus();
      const total = live.summary ? live.summary.instances : "…";
      const places = Object.entries(live.summary ? live.summary.environments : {});
      clear(cards.instances, h("h2", { id: "ov-instances", text: "Instances" }),
        h("p", {}, h("span", { class: "big", "data-testid": "instance-total", text: total }), " registered"),
        h("dl", { class: "counts", "aria-label": "instances by status" },
          Object.entries(counts).map(([status, n]) => h("div", { "data-status": status },
            h("dt", {}, badge(status)), h("dd", {}, n > 0
              ? h("a", { href: `#/instances?status=${status}`, "aria-label": `${n} ${status}`, text: n }) : String(n))))),
        places.length > 1 || (places.length === 1 && places[0][0] !== "default")
          ? [h("h3", { text: "By environment" }), h("ul", { class: "plain", "data-testid": "environments" },
            places.map(([name, n]) => h("li", {},
              h("a", { href: `#/instances?environment=${encodeURIComponent(name)}`, text: name }), ` · ${n}`)))]
          : null);
    },
    failing() {
      const title = h("h2", { id: "ov-failing", text: `Failing (${failing.total ?? "…"})` });
      if (failing.rows === null) { clear(cards.failing, title, h("p", { class: "muted", text: "Reading the critical instances…" })); return; }
      if (failing.rows.length === 0) { clear(cards.failing, title, h("p", { class: "muted", text: "No instance is critical." })); return; }
      const byService = new Map();
      for (const i of failing.rows) {
        if (!byService.has(i.service)) byService.set(i.service, []);
        byService.get(i.service).push(i.id);
      }
      clear(cards.failing, title,
        h("ul", { class: "plain failing" }, [...byService.entries()].sort((a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0]))
          .map(([service, ids]) => h("li", { "data-service": service },
            h("a", { href: `#/instances?service=${encodeURIComponent(service)}&status=critical`, text: service }),
            ` · ${ids.length} critical: `,
            ids.slice(0, IDS_PER_SERVICE).map((id, k) => [k ? ", " : "", h("a", { class: "mono", href: `#/instances/${encodeURIComponent(id)}`, text: id })]),
            ids.length > IDS_PER_SERVICE ? ` and ${ids.length - IDS_PER_SERVICE} more` : ""))),
        failing.total > failing.rows.length
          ? h("p", {}, `The first ${failing.rows.length} by id. `, h("a", { href: "#/instances?status=critical", text: `All ${failing.total} critical instances` }))
          : null);
    },
    services() {
      const services = live.services();
      clear(cards.services, h("h2", { id: "ov-services", text: `Services (${services.length})` }),
        services.length === 0 ? h("p", { class: "muted", text: "No instance is registered." })
          : h("ul", { class: "plain" }, services.slice(0, 12).map(([name, n]) => h("li", {},
            h("a", { href: `#/instances?service=${encodeURIComponent(name)}`, text: name }), ` · ${n}`))),
        services.length > 12 ? h("p", {}, h("a", { href: "#/instances", text: `All ${services.length} services` })) : null);
    },
    ontologies() {
      const list = live.ontologies || [];
      clear(cards.ontologies, h("h2", { id: "ov-ontologies", text: `Ontologies (${list.length})` }),
        h("p", {}, h("span", { class: "big", "data-testid": "concepts", text: live.concepts ?? "…" }), " concepts in the hierarchy"),
        h("ul", { class: "plain" }, list.map((o) => h("li", {}, h("a", { href: "#/ontologies", text: o.name }),
          ` · ${o.triples} triples, ${o.inferred} inferred`))));
    },
    cluster() {
      const c = live.cluster;
      if (!c) {
        clear(cards.cluster, h("h2", { id: "ov-cluster", text: "Cluster" }), h("p", { class: "muted", text: "Reading the members…" }));
        return;
      }
      clear(cards.cluster, h("h2", { id: "ov-cluster", text: "Cluster" }),
        h("dl", { class: "fields" }, h("dt", { text: "this node" }), h("dd", { class: "mono", text: c.node }),
          h("dt", { text: "ring checksum" }), h("dd", { class: "mono", "data-testid": "checksum", text: c.checksum }),
          h("dt", { text: "replicas" }), h("dd", { text: c.replicas }),
          c.degraded ? [h("dt", { text: "etcd" }), h("dd", { class: "bad", text: "unreachable: serving on the last ring known" })] : null),
        h("h3", { text: `Members (${c.members.length})` }),
        table(["member", "address", "status"], c.members.map((m) => h("tr", {},
          h("td", { class: "mono", text: m.id }), h("td", { class: "mono", text: m.address }), h("td", {}, badge(m.status))))));
    },
    changes() {
      clear(cards.changes, h("h2", { id: "ov-changes", text: "Recent changes" }),
        live.changes.length === 0 ? h("p", { class: "muted", text: "Changes appear here as they happen, newest first." })
          : h("ol", { class: "plain changes", "aria-live": "polite" }, live.changes.map((c) => h("li", {},
            time(c.at.toISOString()), c.href ? h("a", { href: c.href, text: c.text }) : h("span", { text: c.text })))));
    },
  };
  // The critical instances, a page of them read from the server (never the whole list): when the count of
  // critical ones changes, or a change names a critical instance or one shown. One read at a time.
  const failing = { rows: null, total: null, count: null, reading: false, again: false };
  const environments = principal?.environments || ["*"];
  async function readFailing() {
    if (failing.reading) { failing.again = true; return; }
    failing.reading = true;
    try {
      do {
        failing.again = false;
        failing.count = live.byStatus().critical;
        let rows = [];
        let total = 0;
        if (!live.summary || failing.count > 0) {
          for (const environment of environments) {
            const response = await request(`/v1/instances${qs({ status: "critical", tags: "false", limit: FAILING_SHOWN, environment })}`);
            rows = rows.concat(await response.json());
            total += Number(response.headers.get("X-Semreg-Total")) || 0;
          }
        }
        failing.rows = rows.slice(0, FAILING_SHOWN);
        failing.total = total;
        draw.failing();
      } while (failing.again);
    } finally {
      failing.reading = false;
    }
  }
  const failingTouched = () => live.latest === null || live.latest.some((c) => c.status === "critical"
    || (failing.rows || []).some((i) => i.id === c.id));

  const redraw = (event) => {
    const what = event ? event.detail : null;
    if (!what || what === "summary") { draw.instances(); draw.services(); draw.ontologies(); }
    if (what === "summary" && live.byStatus().critical !== failing.count) readFailing().catch(() => {});
    if (what === "instances" && failingTouched()) readFailing().catch(() => {});
    if (!what) draw.failing();
    if (!what || what === "instances") draw.changes();
    if (!what || what === "ontologies") { draw.ontologies(); draw.changes(); }
    if (!what || what === "cluster") draw.cluster();
  };
  redraw();
  readFailing().catch(() => {});
  live.addEventListener("change", redraw);
  return () => live.removeEventListener("change", redraw);
}
