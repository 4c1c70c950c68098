// The console's one way to the API: the signed-in token on every request, the server's sentence on
// every refusal. The token lives in sessionStorage: this tab only, gone when it closes.
const KEY = "semreg.token";

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

let onUnauthorized = () => {};
export function whenUnauthorized(callback) { onUnauthorized = callback; }

export async function request(path, { method = "GET", json, body, headers = {}, signal, quiet401 = false } = {}) {
  const sent = { ...headers };
  const t = token.get();
  if (t) sent.Authorization = `Bearer ${t}`;
  if (json !== undefined) {
    sent["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  const response = await fetch(path, { method, headers: sent, body, signal, cache: "no-store" });
  if (!response.ok) {
    let data = {};
    try { data = await response.json(); } catch { /* not JSON: the status line says it */ }
    const error = new ApiError(response.status, data.error || `${response.status} ${response.statusText}`, data);
    if (response.status === 401 && !quiet401) onUnauthorized(error);
    throw error;
  }
  return response;
}

export async function getJSON(path, options) {
  return (await request(path, options)).json();
}

// Query string from an object, leaving out empty values.
export function qs(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") search.append(k, v);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// A SPARQL SELECT's JSON results.
export async function sparql(query, { accept = "application/sparql-results+json", signal } = {}) {
  return request("/sparql", { method: "POST", body: query, signal,
    headers: { "Content-Type": "application/sparql-query", Accept: accept } });
}
