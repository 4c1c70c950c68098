// What the overview and the lists show, kept current by watches: blocking reads of GET /v1/instances
// and GET /v1/ontologies (?index=N&wait=), each answering when its own result changes. The cluster's
// members are not a watch: they are read again with every change seen and every 10 s. Recent changes
// are what differs between two answers of a watch, so they start when the page opens.
import { getJSON, request } from "./api.js";
import { setPrefixes } from "./terms.js";

const WAIT = "60s";
const MAX_CHANGES = 50;
const CLUSTER_EVERY_MS = 10_000;

export class Live extends EventTarget {
  constructor() {
    super();
    this.instances = null;  // [view without tags]
    this.ontologies = null;
    this.cluster = null;
    this.concepts = null;   // the hierarchy's size (semreg_concepts)
    this.changes = [];      // [{at: Date, text, href}]
    this.error = null;
    this.controller = new AbortController();
  }

  start() {
    this.loop("/v1/instances?tags=false&environment=*", (list) => this.onInstances(list));
    this.loop("/v1/ontologies", (list) => this.onOntologies(list));
    this.refreshCluster();
    this.timer = setInterval(() => this.refreshCluster(), CLUSTER_EVERY_MS);
  }

  stop() {
    this.controller.abort();
    clearInterval(this.timer);
  }

  emit(what) { this.dispatchEvent(new CustomEvent("change", { detail: what })); }

  async loop(path, apply) {
    const signal = this.controller.signal;
    let index = null;
    const join = path.includes("?") ? "&" : "?";
    while (!signal.aborted) {
      try {
        const url = index === null ? path : `${path}${join}index=${index}&wait=${WAIT}`;
        const response = await request(url, { signal });
        const next = response.headers.get("X-Semreg-Index");
        const body = await response.json();
        if (next !== index) apply(body);
        index = next;
        this.setError(null);
      } catch (error) {
        if (signal.aborted) return;
        this.setError(error);
        if (error.status === 401) return;
        await new Promise((resolve) => setTimeout(resolve, 2000));
        index = null;
      }
    }
  }

  setError(error) {
    const was = this.error;
    this.error = error;
    if ((was === null) !== (error === null)) this.emit("error");
  }

  note(text, href) {
    this.changes.unshift({ at: new Date(), text, href });
    this.changes.length = Math.min(this.changes.length, MAX_CHANGES);
  }

  onInstances(list) {
    const before = this.instances ? new Map(this.instances.map((i) => [i.id, i])) : null;
    if (before) {
      const now = new Map(list.map((i) => [i.id, i]));
      for (const [id, inst] of now) {
        const old = before.get(id);
        const href = `#/instances/${encodeURIComponent(id)}`;
        if (!old) this.note(`${id} registered (${inst.service})`, href);
        else if (old.registered_at !== inst.registered_at) this.note(`${id} registered again (${inst.service})`, href);
        else if (old.status !== inst.status) this.note(`${id}: ${old.status} → ${inst.status}`, href);
      }
      for (const id of before.keys()) if (!now.has(id)) this.note(`${id} deregistered`);
    }
    this.instances = list;
    this.emit("instances");
    if (before) this.refreshCluster();
  }

  async onOntologies(list) {
    const before = this.ontologies ? new Map(this.ontologies.map((o) => [o.name, o])) : null;
    if (before) {
      const now = new Map(list.map((o) => [o.name, o]));
      for (const [name, o] of now) {
        const old = before.get(name);
        if (!old) this.note(`ontology ${name} uploaded (${o.triples} triples)`, "#/ontologies");
        else if (old.uploaded_at !== o.uploaded_at) this.note(`ontology ${name} replaced (${o.triples} triples)`, "#/ontologies");
      }
      for (const name of before.keys()) if (!now.has(name)) this.note(`ontology ${name} deleted`, "#/ontologies");
    }
    this.ontologies = list;
    try {
      setPrefixes(await getJSON("/v1/prefixes"));
      this.concepts = await conceptCount();
    } catch (error) {
      this.setError(error);
    }
    this.emit("ontologies");
  }

  async refreshCluster() {
    try {
      this.cluster = await getJSON("/v1/cluster", { signal: this.controller.signal });
      this.emit("cluster");
    } catch (error) {
      if (!this.controller.signal.aborted) this.setError(error);
    }
  }

  services() {
    const counts = new Map();
    for (const i of this.instances || []) counts.set(i.service, (counts.get(i.service) || 0) + 1);
    return [...counts.entries()].sort((a, b) => a[0].localeCompare(b[0]));
  }

  byStatus() {
    const counts = { up: 0, draining: 0, blocked: 0, critical: 0 };
    for (const i of this.instances || []) counts[i.status] = (counts[i.status] || 0) + 1;
    return counts;
  }
}

// The size of the hierarchy index, from the metrics the server exports.
async function conceptCount() {
  const text = await (await request("/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith("semreg_concepts "));
  return line ? Number(line.split(" ")[1]) : null;
}
