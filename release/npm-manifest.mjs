// The package.json files release/build packs, made from the committed ones.
//
//   node release/npm-manifest.mjs platform VERSION PLATFORM   a per-platform package
//   node release/npm-manifest.mjs depend VERSION < package.json
//       the same package as published: no scripts, no devDependencies, not
//       private, depending on `plan-checkpoint` (the binary) at VERSION.
import { readFileSync } from "node:fs";

const [mode, version, platform] = process.argv.slice(2);
const launcher = JSON.parse(readFileSync(new URL("../packaging/npm/plan-checkpoint/package.json", import.meta.url), "utf8"));
const common = {
  license: launcher.license,
  repository: launcher.repository,
  homepage: launcher.homepage,
};

let manifest;
if (mode === "platform") {
  const [os, cpu] = platform.split("-");
  manifest = {
    name: `@plan-checkpoint/${platform}`,
    version,
    description: `The plan-checkpoint binary for ${platform} (installed by the plan-checkpoint package)`,
    ...common,
    os: [os],
    cpu: [cpu],
    ...(os === "linux" ? { libc: ["glibc"] } : {}),
    files: ["bin/plan-checkpoint", "README.md", "LICENSE-MIT", "LICENSE-APACHE"],
    preferUnplugged: true,
  };
} else if (mode === "depend") {
  const source = JSON.parse(readFileSync(0, "utf8"));
  const { scripts: _scripts, devDependencies: _dev, private: _private, ...rest } = source;
  manifest = {
    ...rest,
    version,
    ...common,
    dependencies: { ...(source.dependencies ?? {}), "plan-checkpoint": version },
  };
  manifest.files = [...new Set([...(manifest.files ?? []), "LICENSE-MIT", "LICENSE-APACHE"])];
} else {
  process.stderr.write("usage: npm-manifest.mjs platform VERSION PLATFORM | depend VERSION < package.json\n");
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(manifest, null, 2)}\n`);
