// Overview: services, instances by status and by environment, ontologies and concepts (the counts of
// GET /v1/summary), cluster members and the ring checksum, recent changes; each card redrawn when the
// live state it shows changes.
import { badge, clear, h, table, time } from "../dom.js";

export function render(main, { live }) {
  const cards = {
    instances: h("section", { class: "card", "aria-labelledby": "ov-instances" }),
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
            h("dt", {}, badge(status)), h("dd", { text: n })))),
        places.length > 1 || (places.length === 1 && places[0][0] !== "default")
          ? [h("h3", { text: "By environment" }), h("ul", { class: "plain", "data-testid": "environments" },
            places.map(([name, n]) => h("li", {},
              h("a", { href: `#/instances?environment=${encodeURIComponent(name)}`, text: name }), ` · ${n}`)))]
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
  const redraw = (event) => {
    const what = event ? event.detail : null;
    if (!what || what === "summary") { draw.instances(); draw.services(); draw.ontologies(); }
    if (!what || what === "instances") draw.changes();
    if (!what || what === "ontologies") { draw.ontologies(); draw.changes(); }
    if (!what || what === "cluster") draw.cluster();
  };
  redraw();
  live.addEventListener("change", redraw);
  return () => live.removeEventListener("change", redraw);
}
