// Register an instance (PUT with an id, POST without) or edit one (PUT replaces it). Tags, one a line,
// are checked as they are typed by the server's own parser (POST /v1/discover/tags, which changes
// nothing): each line shows its full IRIs, or the server's sentence at the line at fault.
//
// A PUT replaces the whole registration, so an edit starts from the registration as read and changes
// only what the form shows: a field it does not show (a check's interval, one the server adds later)
// goes back as it was, never to its default.
import { getJSON, request } from "../api.js";
import { clear, debounce, errorBox, field, h, showError } from "../dom.js";
import { tagText } from "../terms.js";

// What the view of an instance holds that a registration does not: the server's, never sent back.
const VIEW_ONLY = ["status", "load", "expires_at", "registered_at", "owner", "warnings", "last_check", "critical"];

export async function render(main, { params, navigate, may, principal }) {
  const [editing] = params;
  const title = editing ? `Edit ${editing}` : "Register an instance";
  main.append(h("h1", { text: title }));
  if (!may("write")) {
    main.append(h("p", { class: "muted", text: "This token may not register instances." }));
    return;
  }
  const current = editing ? await getJSON(`/v1/instances/${encodeURIComponent(editing)}`) : null;
  const input = (name, attrs = {}) => h("input", { name, id: `f-${name}`, ...attrs });
  const f = {
    id: input("id", { value: editing || "", readonly: editing ? true : null, pattern: "[A-Za-z0-9._:\\-]{1,128}",
      placeholder: "chosen by the server when empty" }),
    service: input("service", { required: true, value: current?.service ?? "" }),
    address: input("address", { required: true, value: current?.address ?? "127.0.0.1" }),
    port: input("port", { type: "number", min: 1, max: 65535, required: true, value: current?.port ?? "" }),
    scheme: input("scheme", { value: current?.scheme ?? "http" }),
    weight: input("weight", { type: "number", min: 1, max: 10000, value: current?.weight ?? 1 }),
    capacity: input("capacity", { type: "number", min: 1, value: current?.capacity ?? "" }),
    environment: input("environment", { required: true, pattern: "[A-Za-z0-9._\\-]{1,64}",
      value: current?.environment ?? principal?.environments?.[0] ?? "default" }),
    // no lease by default: an instance made here has nothing heartbeating for it
    ttl: input("ttl", { type: "number", min: 0, step: "any", value: current?.ttl ?? 0, "aria-describedby": "ttl-help" }),
    deregister_after: input("deregister_after", { type: "number", min: 0, step: "any", value: current?.deregister_after ?? "",
      placeholder: "server default", "aria-describedby": "deregister-help" }),
  };
  const ttlHelp = h("span", { id: "ttl-help", class: "muted",
    text: "0: no lease, it stays until deregistered. Above 0: critical when no heartbeat comes within it." });
  const deregisterHelp = h("span", { id: "deregister-help", class: "muted",
    text: "Removed once critical this long. Empty: 90 s with a ttl; never without one. 0: never." });
  const checkKind = h("select", { name: "check", id: "f-check" }, ["none", "http", "tcp"].map((k) =>
    h("option", { value: k, text: k, selected: current?.check ? (k in current.check) : k === "none" })));
  const checkTarget = input("check_target", { value: current?.check?.http ?? current?.check?.tcp ?? "",
    placeholder: "http://host:port/health or host:port" });
  const meta = h("textarea", { name: "meta", id: "f-meta", rows: 3,
    text: current ? Object.entries(current.meta).map(([k, v]) => `${k}=${v}`).join("\n") : "" });
  const tagsHelp = h("span", { id: "tags-help", class: "muted",
    text: "One tag a line: one term, or subject predicate object (CURIEs, full IRIs or <IRI>; a for rdf:type)." });
  const tags = h("textarea", { name: "tags", id: "f-tags", rows: 6, "aria-describedby": "tags-help tags-check",
    text: current ? current.tags.map((t) => tagText(t)).join("\n") : "" });
  const tagsCheck = h("ol", { id: "tags-check", class: "plain tags-check", "aria-live": "polite" });
  const box = errorBox();

  const lines = () => tags.value.split("\n").map((l) => l.trim()).filter(Boolean);
  let checking = 0;
  async function checkTags() {
    const mine = ++checking;
    const list = lines();
    if (list.length === 0) { clear(tagsCheck); tags.removeAttribute("aria-invalid"); return; }
    try {
      const answer = await (await request("/v1/discover/tags?tags=false", { method: "POST", json: { tags: list } })).json();
      if (mine !== checking) return;
      tags.setAttribute("aria-invalid", "false");
      const keys = Object.keys(answer.peers);
      clear(tagsCheck, h("li", { class: "ok", text: `${list.length} tag${list.length === 1 ? "" : "s"} valid` }),
        keys.map((k) => h("li", { class: "muted", text: k })));
    } catch (error) {
      if (mine !== checking) return;
      tags.setAttribute("aria-invalid", "true");
      const at = /^tags\[(\d+)\]/.exec(error.body?.field || "");
      const line = at ? Number(at[1]) + 1 : null;
      clear(tagsCheck, h("li", { class: "bad", "data-testid": "tag-error",
        text: line ? `line ${line} (${list[line - 1]}): ${error.message.replace(/^tags\[\d+\]: /, "")}` : error.message }));
    }
  }
  tags.addEventListener("input", debounce(checkTags, 250));

  function body() {
    const out = { ...(current || {}) };
    for (const key of VIEW_ONLY) delete out[key];
    Object.assign(out, { service: f.service.value.trim(), address: f.address.value.trim(), port: Number(f.port.value),
      scheme: f.scheme.value.trim() || "http", tags: lines(), weight: Number(f.weight.value || 1),
      environment: f.environment.value.trim() || "default", ttl: Number(f.ttl.value || 0), meta: {} });
    if (f.deregister_after.value !== "") out.deregister_after = Number(f.deregister_after.value);
    else delete out.deregister_after;
    if (f.capacity.value) out.capacity = Number(f.capacity.value);
    else delete out.capacity;
    if (checkKind.value === "none") delete out.check;
    else {
      // the same kind of check keeps its interval and timeout; another kind starts from the server's
      const same = current?.check && checkKind.value in current.check;
      out.check = { ...(same ? current.check : {}), [checkKind.value]: checkTarget.value.trim() };
      for (const other of ["http", "tcp"]) if (other !== checkKind.value) delete out.check[other];
    }
    for (const line of meta.value.split("\n").map((l) => l.trim()).filter(Boolean)) {
      const eq = line.indexOf("=");
      out.meta[eq < 0 ? line : line.slice(0, eq)] = eq < 0 ? "" : line.slice(eq + 1);
    }
    return out;
  }

  const form = h("form", { novalidate: true, onsubmit: async (event) => {
    event.preventDefault();
    showError(box, null);
    const id = f.id.value.trim();
    try {
      const response = id
        ? await request(`/v1/instances/${encodeURIComponent(id)}`, { method: "PUT", json: body() })
        : await request("/v1/instances", { method: "POST", json: body() });
      const view = await response.json();
      navigate(`#/instances/${encodeURIComponent(view.id)}`);
    } catch (error) {
      showError(box, error);
      box.focus?.();
    }
  } },
  h("div", { class: "form-grid" },
    field("Id", f.id), field("Service", f.service), field("Address", f.address), field("Port", f.port),
    field("Scheme", f.scheme), field("Environment", f.environment), field("Weight", f.weight),
    field("Capacity (optional)", f.capacity),
    h("label", { for: "f-ttl" }, "ttl (s, 0 = never expires)", f.ttl, ttlHelp),
    h("label", { for: "f-deregister_after" }, "Deregister after (s, optional)", f.deregister_after, deregisterHelp)),
  h("fieldset", {}, h("legend", { text: "Health check" }),
    h("div", { class: "form-grid" }, field("Kind", checkKind), field("Target", checkTarget))),
  h("div", { class: "form-grid" },
    h("label", { class: "span", for: "f-tags" }, "Tags", tagsHelp, tags),
    h("div", { class: "span" }, tagsCheck),
    h("label", { class: "span", for: "f-meta" }, "Meta (key=value, one a line)", meta)),
  box,
  h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", text: editing ? "Save" : "Register" }),
    h("a", { href: editing ? `#/instances/${encodeURIComponent(editing)}` : "#/instances", text: "Cancel" })));
  main.append(form);
  if (current) checkTags();
}
