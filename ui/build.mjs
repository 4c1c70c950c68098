// Rebuild semreg/ui/vendor/ from npm: the editor bundle (CodeMirror 6 and its SPARQL mode) with the
// licences of everything in it. Run from this folder: `npm ci && npm run build`. The output is
// committed, so neither installing semreg nor its tests need npm.
import { build } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";

const out = new URL("../semreg/ui/vendor/", import.meta.url).pathname;
mkdirSync(out, { recursive: true });
const result = await build({
  entryPoints: ["editor.js"], bundle: true, format: "esm", minify: true, target: "es2020",
  outfile: join(out, "editor.js"), metafile: true, legalComments: "none",
});

// The licence of every package whose code is in the bundle, in one file beside it.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (m) packages.add(m[1]);
}
const parts = [];
for (const name of [...packages].sort()) {
  const dir = join("node_modules", name);
  const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const text = file && existsSync(join(dir, file)) ? readFileSync(join(dir, file), "utf8").trim() : `${meta.license}`;
  parts.push(`${name} ${meta.version} (${meta.license})\n\n${text}`);
}
writeFileSync(join(out, "editor.LICENSES.txt"),
  "Third-party code bundled in editor.js, one licence per package:\n\n" + parts.join("\n\n" + "-".repeat(72) + "\n\n") + "\n");
console.log(`editor.js: ${[...packages].length} packages, ${(readFileSync(join(out, "editor.js")).length / 1024).toFixed(0)} KiB`);

// axe-core for the browser tests, which inject it into each page they check (tests/vendor/).
const tests = new URL("../tests/vendor/", import.meta.url).pathname;
mkdirSync(tests, { recursive: true });
const axe = JSON.parse(readFileSync("node_modules/axe-core/package.json", "utf8"));
writeFileSync(join(tests, "axe.min.js"), readFileSync("node_modules/axe-core/axe.min.js"));
writeFileSync(join(tests, "axe.LICENSE.txt"),
  `axe-core ${axe.version} (${axe.license})\n\n` + readFileSync("node_modules/axe-core/LICENSE", "utf8"));
console.log(`axe-core ${axe.version} copied to tests/vendor/`);
