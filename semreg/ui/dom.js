// Building the page without a framework: h() makes an element, the rest are small shared pieces.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let ids = 0;
export function uid(prefix = "id") { ids += 1; return `${prefix}-${ids}`; }

// A labelled control: <label>text <control></label>.
export function field(text, control, hint) {
  return h("label", {}, text, control, hint ? h("span", { class: "muted", text: hint }) : null);
}

export function badge(status) {
  return h("span", { class: `badge ${status}`, text: status });
}

// Where an action's refusal is shown: the server's sentence, announced to screen readers.
export function errorBox() {
  return h("div", { class: "error", role: "alert" });
}

export function showError(box, error) {
  box.textContent = error ? error.message || String(error) : "";
}

export function table(headers, rows, { caption } = {}) {
  return h("table", {},
    caption ? h("caption", { class: "muted", text: caption }) : null,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col", class: x.num ? "num" : null, text: x.label ?? x })))),
    h("tbody", {}, rows));
}

// Ask before an action that changes something; resolves true when confirmed.
export function confirmAction(title, text, confirmLabel) {
  return new Promise((resolve) => {
    const titleId = uid("dialog-title");
    const dialog = h("dialog", { "aria-labelledby": titleId },
      h("h2", { id: titleId, text: title }), h("p", { text }),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", value: "yes", onclick: () => dialog.close("yes"), text: confirmLabel }),
        h("button", { type: "button", value: "no", onclick: () => dialog.close("no"), text: "Cancel" })));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.returnValue === "yes"); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// An instant as the server and its logs say it, in UTC with the zone: 2026-12-06 03:24:54 UTC (a
// browser's local time, unlabelled, would not match either); how long ago or ahead it is on hover.
export function time(iso) {
  if (!iso) return "never";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return h("time", { datetime: iso, title: relative(d), text: `${d.toISOString().slice(0, 19).replace("T", " ")} UTC` });
}

export function relative(date, now = Date.now()) {
  const s = Math.round((date.getTime() - now) / 1000);
  const a = Math.abs(s);
  const amount = a < 90 ? `${a} s` : a < 5400 ? `${Math.round(a / 60)} min` : a < 129600 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} days`;
  return s <= 0 ? `${amount} ago` : `in ${amount}`;
}

export function debounce(fn, ms) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}
