// What the overview and the lists show, kept current without reading whole lists again: the counts of
// GET /v1/summary, the ontologies (a watch: GET /v1/ontologies?index=N&wait=), and the changes of
// instances, a blocking read of GET /v1/changes?index=N&wait= whose answer names the instances that
// changed (which, why, their status now): a few hundred bytes however many instances are registered.
// A view reads again only what it shows and a change touched: an "instances" event leaves the changes
// in `latest`, or null when they are not all known (after a reset or a lost connection) and everything
// shown is to be read again. Every read covers the environments the token sees. The cluster's members
// are not a watch: they are read again with every change seen and every 10 s. Recent changes start when
// the page opens.
import { getJSON, request } from "./api.js";
import { setPrefixes } from "./terms.js";

const WAIT = "60s";
const MAX_CHANGES = 50;
const CLUSTER_EVERY_MS = 10_000;
const MOVES = new Set(["registered", "replaced", "deregistered", "deleted", "moved"]);

export class Live extends EventTarget {
  constructor() {
    super();
    this.summary = null;    // GET /v1/summary
    this.ontologies = null;
    this.cluster = null;
    this.latest = null;     // the changes of the last "instances" event; null: read everything again
    this.changes = [];      // [{at: Date, text, href}]
    this.error = null;
    this.controller = new AbortController();
    this.reading = null;    // the summary read in flight, and whether another is due after it
    this.readAgain = false;
  }

  get concepts() { return this.summary ? this.summary.concepts : null; }

  start() {
    this.follow();
    this.loop("/v1/ontologies", (list) => this.onOntologies(list));
    this.refreshSummary();
    this.refreshCluster();
    this.timer = setInterval(() => this.refreshCluster(), CLUSTER_EVERY_MS);
  }

  stop() {
    this.controller.abort();
    clearInterval(this.timer);
  }

  emit(what) { this.dispatchEvent(new CustomEvent("change", { detail: what })); }

  // After a failed read: show it, wait two seconds, and say whether to read again (not once stopped, nor
  // without a valid token).
  async recover(error, signal) {
    if (signal.aborted) return false;
    this.setError(error);
    if (error.status === 401) return false;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    return true;
  }

  // The changes of instances, one blocking read after another; after a failure the next answer starts
  // from a new index, and what the views show is read again.
  async follow() {
    const signal = this.controller.signal;
    let index = null;
    let lost = false;
    while (!signal.aborted) {
      try {
        const url = index === null ? "/v1/changes" : `/v1/changes?index=${index}&wait=${WAIT}`;
        const response = await request(url, { signal });
        const body = await response.json();
        const first = index === null;
        index = response.headers.get("X-Semreg-Index");
        this.setError(null);
        if (first && lost) this.onChanges(null);
        else if (!first && (body.reset || body.changes.length)) this.onChanges(body.reset ? null : body.changes);
        lost = false;
      } catch (error) {
        if (!(await this.recover(error, signal))) return;
        index = null;
        lost = true;
      }
    }
  }

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
        if (!(await this.recover(error, signal))) return;
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

  onChanges(list) {
    for (const c of list || []) {
      const href = c.status === null ? undefined : `#/instances/${encodeURIComponent(c.id)}`;
      const services = c.services ? ` (${c.services.join(", ")})` : "";
      if (c.reason === "registered") this.note(`${c.id} registered${services}`, href);
      else if (c.reason === "replaced") this.note(`${c.id} registered again${services}`, href);
      else if (c.reason === "deregistered" || c.reason === "deleted") this.note(`${c.id} ${c.reason}`);
      else if (c.reason === "expired") this.note(`${c.id}: critical, its lease ran out`, href);
      else if (c.reason === "check") this.note(`${c.id}: ${c.status} after its check`, href);
      else if (c.reason !== "moved") this.note(`${c.id}: ${c.status}`, href);
    }
    this.latest = list;
    this.emit("instances");
    this.refreshSummary();
    this.refreshCluster();
  }

  // One summary read at a time; changes seen meanwhile read it once more after it.
  async refreshSummary() {
    if (this.reading) { this.readAgain = true; return; }
    this.reading = true;
    try {
      do {
        this.readAgain = false;
        this.summary = await getJSON("/v1/summary", { signal: this.controller.signal });
        this.emit("summary");
      } while (this.readAgain && !this.controller.signal.aborted);
    } catch (error) {
      if (!this.controller.signal.aborted) this.setError(error);
    } finally {
      this.reading = false;
    }
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
    } catch (error) {
      this.setError(error);
    }
    this.emit("ontologies");
    if (before) this.refreshSummary();  // the hierarchy's concepts
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
    return Object.entries(this.summary ? this.summary.services : {}).sort((a, b) => a[0].localeCompare(b[0]));
  }

  byStatus() {
    return this.summary ? this.summary.by_status : { up: 0, draining: 0, blocked: 0, critical: 0 };
  }
}

// Whether a change may alter a list filtered so: one of its rows, or which rows it holds.
export function touches(change, { service, status, environment }) {
  if (environment && !change.environments.includes(environment)) return false;
  if (service && change.services && !change.services.includes(service)) return false;
  return MOVES.has(change.reason) || Boolean(status);
}
