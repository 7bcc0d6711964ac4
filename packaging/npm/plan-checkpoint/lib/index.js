// Where this machine's plan-checkpoint binary is: in the per-platform
// package npm installed beside this one (an optional dependency whose `os`
// and `cpu` match this machine; npm skips the others). Nothing is
// downloaded at install time and no install script runs.
"use strict";

const path = require("node:path");

/** The per-platform package of each supported `${process.platform}-${process.arch}`. */
const PLATFORM_PACKAGES = {
  "linux-x64": "@plan-checkpoint/linux-x64",
  "linux-arm64": "@plan-checkpoint/linux-arm64",
  "darwin-x64": "@plan-checkpoint/darwin-x64",
  "darwin-arm64": "@plan-checkpoint/darwin-arm64",
};

/** Why no binary could be found, with what to do about it. */
class BinaryNotFoundError extends Error {
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "BinaryNotFoundError";
    this.code = "PLAN_CHECKPOINT_BINARY_NOT_FOUND";
  }
}

/** The per-platform package for this machine, or null when there is none. */
function platformPackage(platform = process.platform, arch = process.arch) {
  return PLATFORM_PACKAGES[`${platform}-${arch}`] ?? null;
}

/**
 * The absolute path of the plan-checkpoint binary for this machine.
 * Throws a BinaryNotFoundError that says what to install when there is none.
 */
function binaryPath() {
  const name = platformPackage();
  if (name === null) {
    throw new BinaryNotFoundError(
      `plan-checkpoint has no prebuilt binary for ${process.platform}-${process.arch} ` +
        `(there are: ${Object.keys(PLATFORM_PACKAGES).join(", ")}). ` +
        "Build it from source with `cargo install plan-checkpoint` (Rust 1.92 or newer and a C compiler).",
    );
  }
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch (error) {
    throw new BinaryNotFoundError(
      `plan-checkpoint's binary package ${name} is not installed. npm installs it as an optional ` +
        "dependency matching this machine: reinstall plan-checkpoint without --omit=optional " +
        "(or --no-optional), e.g. `npm install -g plan-checkpoint`.",
      error,
    );
  }
  return path.join(path.dirname(manifest), "bin", "plan-checkpoint");
}

module.exports = { binaryPath, platformPackage, BinaryNotFoundError, PLATFORM_PACKAGES };
