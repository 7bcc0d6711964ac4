#!/usr/bin/env bash
# Builds the workspace's uniffi-bindgen (crate crates/uniffi-bindgen) and
# prints the path of the binary. generate.sh runs the binary for the
# committed bindings; maturin, building the Python wheel, runs its own
# `cargo run --bin uniffi-bindgen` from the workspace root. Both must find
# one and the same build, or the generator and its dependency tree compile
# twice (minutes).
#
# Why `--bin` and not `-p uniffi-bindgen`: without `-p`, cargo selects every
# workspace member and unifies their features (plan-checkpoint, the CLI, turns on clap's
# `env` and `color`, the other crates more of serde, syn, rustix, libc), so
# `cargo run --bin uniffi-bindgen` builds clap, uniffi_bindgen and the rest
# with other features than `-p uniffi-bindgen` would: two builds of the same
# crates, each replacing the other's binary. Built here exactly as maturin
# builds it (dev profile, whatever the library's profile: the generator's
# output does not depend on how it was compiled), the wheel build finds it
# fresh. python/test-wheel.sh fails if maturin compiles it again.
#
# Usage: crates/ffi/bindings/build-uniffi-bindgen.sh   (cargo's output on stderr)
set -euo pipefail
workspace="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$workspace"
cargo build --locked --bin uniffi-bindgen >&2
echo "${CARGO_TARGET_DIR:-$workspace/target}/debug/uniffi-bindgen"
