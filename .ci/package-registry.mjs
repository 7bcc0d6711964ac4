// A read-only package registry on loopback that serves the release's npm
// tarballs the way the npm registry serves published packages (a packument
// per name, the tarball with its sha512 integrity), and the wheels as a
// PEP 503 "simple" index the way PyPI does, so that `npm install -g
// plan-checkpoint`, `npx plan-checkpoint ...`, `pipx install
// plan-checkpoint` and `uv tool install plan-checkpoint` run as printed.
// Any other name is a 404, as an unpublished one would be. It binds
// 127.0.0.1 only, prints its base URL, and stops when its parent's pipe on
// stdin closes (or at SIGTERM).
//
// Usage: node .ci/package-registry.mjs ARTIFACTS_DIR   (npm/*.tgz, pypi/*.whl)
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";

const artifacts = process.argv[2];
const npmDir = join(artifacts, "npm");
const pypiDir = join(artifacts, "pypi");

/** name -> { version -> { manifest, file, integrity, shasum } } */
const packages = new Map();
for (const file of readdirSync(npmDir).filter((name) => name.endsWith(".tgz"))) {
  const bytes = readFileSync(join(npmDir, file));
  const manifest = JSON.parse(execFileSync("tar", ["-xzOf", join(npmDir, file), "package/package.json"], { encoding: "utf8" }));
  const versions = packages.get(manifest.name) ?? new Map();
  versions.set(manifest.version, {
    manifest,
    file,
    integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    shasum: createHash("sha1").update(bytes).digest("hex"),
  });
  packages.set(manifest.name, versions);
}
const wheels = readdirSync(pypiDir).filter((name) => name.endsWith(".whl"));
/** PEP 503 normalized project name -> wheel files. */
const projects = new Map();
for (const wheel of wheels) {
  const project = wheel.split("-")[0].toLowerCase().replace(/[-_.]+/g, "-");
  projects.set(project, [...(projects.get(project) ?? []), wheel]);
}

const server = createServer((request, response) => {
  const base = `http://${request.headers.host}`;
  const path = decodeURIComponent(new URL(request.url ?? "/", base).pathname);
  const send = (status, type, body) => {
    response.writeHead(status, { "content-type": type });
    response.end(body);
  };
  if (path.startsWith("/simple/")) {
    const project = path.slice("/simple/".length).replace(/\/$/, "").toLowerCase().replace(/[-_.]+/g, "-");
    if (project === "") {
      send(200, "text/html", [...projects.keys()].map((name) => `<a href="${name}/">${name}</a>`).join("\n"));
      return;
    }
    const files = projects.get(project);
    if (files === undefined) return send(404, "text/plain", "not found");
    const links = files.map((wheel) => {
      const sha256 = createHash("sha256").update(readFileSync(join(pypiDir, wheel))).digest("hex");
      return `<a href="${base}/wheels/${wheel}#sha256=${sha256}">${wheel}</a>`;
    });
    send(200, "text/html", `<!DOCTYPE html>\n<html><body>\n${links.join("<br>\n")}\n</body></html>\n`);
    return;
  }
  if (path.startsWith("/wheels/")) {
    const wheel = path.slice("/wheels/".length);
    if (!wheels.includes(wheel)) return send(404, "text/plain", "not found");
    send(200, "application/octet-stream", readFileSync(join(pypiDir, wheel)));
    return;
  }
  if (path.startsWith("/tarballs/")) {
    const file = path.slice("/tarballs/".length);
    for (const versions of packages.values()) {
      for (const entry of versions.values()) {
        if (entry.file === file) return send(200, "application/octet-stream", readFileSync(join(npmDir, file)));
      }
    }
    return send(404, "application/json", '{"error":"not found"}');
  }
  const versions = packages.get(path.slice(1));
  if (versions === undefined) return send(404, "application/json", '{"error":"not found"}');
  const entries = [...versions.values()];
  const latest = entries[entries.length - 1].manifest.version;
  const packument = {
    name: path.slice(1),
    "dist-tags": { latest },
    versions: Object.fromEntries(
      entries.map(({ manifest, file, integrity, shasum }) => [
        manifest.version,
        { ...manifest, _id: `${manifest.name}@${manifest.version}`, dist: { tarball: `${base}/tarballs/${file}`, integrity, shasum } },
      ]),
    ),
  };
  send(200, "application/json", JSON.stringify(packument));
});

server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`http://127.0.0.1:${address.port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.stdin.on("end", stop).on("error", stop).resume();
process.on("SIGTERM", stop);
