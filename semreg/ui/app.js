// The console's shell: sign-in, the live state, and a router from the location's hash to a view.
// Each view is a module with render(main, ctx) that may return a cleanup function.
import { ApiError, getJSON, request, token, whenUnauthorized } from "./api.js";
import { clear, errorBox, h, showError } from "./dom.js";
import { Live } from "./live.js";
import { setPrefixes } from "./terms.js";

const VIEWS = [
  [/^$/, "overview", "Overview"],
  [/^instances$/, "instances", "Instances"],
  [/^register$/, "form", "Register an instance"],
  [/^instances\/([^/]+)\/edit$/, "form", "Edit instance"],
  [/^instances\/([^/]+)$/, "instance", "Instance"],
  [/^ontologies$/, "ontologies", "Ontologies"],
  [/^concepts\/(.+)$/, "concept", "Concept"],
  [/^discover$/, "discover", "Discovery"],
  [/^sparql$/, "sparql", "SPARQL"],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const banner = document.getElementById("banner");
let principal = null;
let live = null;
let cleanup = null;

function may(scope) {
  return principal !== null && principal.scopes.includes(scope);
}

// Whether this token may drain, block, resume, replace or remove the instance: an admin any, a
// write token its own (tokens not in force: everyone).
function mayChange(instance) {
  if (may("admin")) return true;
  if (!may("write")) return false;
  return !principal.tokens || instance.owner === principal.name;
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

// Each navigation renders into a page of its own: a view still loading or rendering when the next
// navigation comes (a hash change during the sign-in's first render) finishes into its page, which is
// no longer shown, instead of over the newer view.
let routeSeq = 0;

async function route() {
  if (!principal) return;
  const seq = ++routeSeq;
  if (cleanup) { cleanup(); cleanup = null; }
  const { path, query } = parseHash();
  const found = VIEWS.map(([re, name, title]) => [re.exec(path), name, title]).find(([m]) => m);
  for (const a of nav.querySelectorAll("a")) {
    const target = a.getAttribute("href").slice(2);
    const current = target === "" ? path === "" : path === target || path.startsWith(`${target}/`);
    if (current) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  if (!found) {
    clear(main, h("h1", { tabindex: "-1", text: "Not found" }), h("p", {}, "No view here. ", h("a", { href: "#/", text: "Overview" })));
    return;
  }
  const [match, name, title] = found;
  document.title = `${title} · semreg`;
  const view = await import(`./views/${name}.js`);
  if (seq !== routeSeq) return;
  const page = h("div", { class: "page" });
  clear(main, page);
  const ctx = { live, principal, may, mayChange, query, params: match.slice(1).map(decodeURIComponent),
    navigate: (hash) => { location.hash = hash; } };
  try {
    const done = (await view.render(page, ctx)) || null;
    if (seq !== routeSeq) { if (done) done(); return; }
    cleanup = done;
  } catch (error) {
    if (seq !== routeSeq) return;
    if (error instanceof ApiError && error.status === 401) return;
    const box = errorBox();
    showError(box, error);
    page.append(box);
  }
  const heading = page.querySelector("h1");
  if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus({ preventScroll: true }); }
}

function showWho() {
  clear(who);
  if (!principal) return;
  const text = principal.tokens ? `Signed in as ${principal.name} (${principal.scopes.join(", ")})` : "No tokens in force: open access";
  who.append(h("span", { text }));
  if (principal.tokens) who.append(h("button", { type: "button", onclick: signOut, text: "Sign out" }));
}

function signOut() {
  token.clear();
  principal = null;
  if (live) { live.stop(); live = null; }
  nav.hidden = true;
  showWho();
  showSignIn();
}

function showSignIn(message) {
  if (cleanup) { cleanup(); cleanup = null; }
  document.title = "Sign in · semreg";
  const box = errorBox();
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", required: true });
  const form = h("form", { onsubmit: async (event) => {
    event.preventDefault();
    token.set(input.value.trim());
    try {
      await signIn();
    } catch (error) {
      token.clear();
      showError(box, error);
      input.focus();
    }
  } },
  h("label", { for: "token" }, "Token", input),
  h("button", { type: "submit", class: "primary", text: "Sign in" }), box);
  clear(main, h("section", { class: "signin" },
    h("h1", { text: "Sign in to semreg" }),
    h("p", { class: "muted", text: "This server checks tokens. The token is kept for this tab only, until it closes." }),
    form));
  if (message) showError(box, { message });
  input.focus();
}

// Who the stored token is; the sign-in form when there is none, or it cannot read.
async function signIn() {
  const me = await getJSON("/v1/token/self", { quiet401: true });
  if (me.scopes.length === 0) {
    showSignIn();
    return;
  }
  if (!me.scopes.includes("read")) {
    throw new ApiError(403, `the token '${me.name}' lacks the 'read' scope the console needs to show anything.`);
  }
  principal = me;
  nav.hidden = false;
  showWho();
  const prefixes = await getJSON("/v1/prefixes");
  setPrefixes(prefixes);
  live = new Live();
  live.addEventListener("change", (event) => {
    if (event.detail !== "error") return;
    banner.hidden = live.error === null;
    banner.textContent = live.error ? `Live updates paused: ${live.error.message} Retrying…` : "";
  });
  live.start();
  await route();
}

whenUnauthorized((error) => {
  if (!principal) return;
  token.clear();
  principal = null;
  if (live) { live.stop(); live = null; }
  nav.hidden = true;
  showWho();
  showSignIn(error.message);
});

window.addEventListener("hashchange", route);

(async () => {
  try {
    await signIn();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      token.clear();
      showSignIn();
    } else {
      clear(main, h("h1", { text: "semreg cannot be reached" }), h("p", { class: "error", role: "alert", text: error.message }));
    }
  }
})();

export { request };
