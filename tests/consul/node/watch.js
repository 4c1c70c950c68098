// Watch a Consul service name with node-consul's own `watch` (as its users do: `health.service`, starting at
// index 0) and print each answer's service ids as one JSON line, so the test reads what the client saw.
// Errors go to stderr as lines too: node-consul ends a watch it cannot continue (no index, a 400).
const Consul = require("consul");

const [host, port, service] = process.argv.slice(2);
const consul = new Consul({ host, port: Number(port) });
const watch = consul.watch({
  method: consul.health.service,
  options: { service, wait: "60s" },
  backoffFactor: 100,
});
watch.on("change", (entries, res) => {
  const ids = entries.map((e) => e.Service.ID).sort();
  process.stdout.write(JSON.stringify({ index: res.headers["x-consul-index"], ids }) + "\n");
});
watch.on("error", (err) => process.stderr.write(`error: ${err.message}\n`));
watch.on("end", () => {
  process.stderr.write("end\n");
  process.exit(3);
});
process.stdin.on("end", () => process.exit(0)); // the test closing our stdin ends us
process.stdin.resume();
