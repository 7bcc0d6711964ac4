#!/usr/bin/env bash
# Builds the plan-ffi cdylib and generates its Kotlin, Swift and Python
# bindings into bindings/<language>/generated/. The native library is copied
# to bindings/native/ (for Kotlin through JNA); Python gets it inside the
# wheel that python/test-wheel.sh builds.
#
# Usage: crates/ffi/bindings/generate.sh [--release]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
workspace="$(cd "$here/../../.." && pwd)"
profile=debug
cargo_profile=()
if [ "${1:-}" = "--release" ]; then
  profile=release
  cargo_profile=(--release)
fi
target_dir="${CARGO_TARGET_DIR:-$workspace/target}"

cd "$workspace"
# Built one package at a time so that the generator's extra UniFFI features
# never leak into the library that hosts load.
cargo build --locked -p plan-ffi "${cargo_profile[@]}"
# The generator is built once, in the dev profile, whatever the library's
# profile, and exactly as maturin builds it for the Python wheel, so that
# neither `--release` nor the wheel compiles it a second time (see
# build-uniffi-bindgen.sh).
bindgen="$("$here/build-uniffi-bindgen.sh")"

case "$(uname -s)" in
  Darwin) library="$target_dir/$profile/libplan_ffi.dylib" ;;
  *) library="$target_dir/$profile/libplan_ffi.so" ;;
esac

for language in kotlin swift python; do
  rm -rf "$here/$language/generated"
  # The crate's uniffi.toml (package and module names) is found next to its
  # Cargo.toml; --no-format keeps the output independent of local formatters.
  "$bindgen" generate --library "$library" --language "$language" \
    --out-dir "$here/$language/generated" --no-format
done

# The command sandbox helper the suites point their hosts at, as an app
# would ship it beside its native library.
cargo build --locked -p plan-exec --bin plan-exec-sandbox "${cargo_profile[@]}"

mkdir -p "$here/native"
cp "$library" "$here/native/"
cp "$target_dir/$profile/plan-exec-sandbox" "$here/native/"
echo "bindings generated from $library"
