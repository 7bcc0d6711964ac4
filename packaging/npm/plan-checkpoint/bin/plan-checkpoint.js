#!/usr/bin/env node
// `plan-checkpoint` on PATH (npm install -g) or through npx: runs this
// machine's binary with the same arguments, stdio, exit status and signal.
"use strict";

const { spawnSync } = require("node:child_process");
const { binaryPath } = require("../lib/index.js");

let binary;
try {
  binary = binaryPath();
} catch (error) {
  process.stderr.write(`plan-checkpoint: ${error.message}\n`);
  process.exit(1);
}
const result = spawnSync(binary, process.argv.slice(2), { stdio: "inherit" });
if (result.error !== undefined) {
  process.stderr.write(`plan-checkpoint: cannot run ${binary}: ${result.error.message}\n`);
  process.exit(1);
}
if (result.signal !== null) {
  // Die of the same signal, so that a caller sees what the binary saw.
  process.kill(process.pid, result.signal);
}
process.exit(result.status ?? 1);
