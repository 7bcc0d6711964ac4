#!/usr/bin/env bash
# Builds PlanCheckpointFFI.xcframework beside this script, the binary target
# of Package.swift: plan-ffi as a static library for
#   - macOS: arm64 and x86_64 in one library (lipo),
#   - iOS devices: arm64,
#   - the iOS simulator on Apple silicon: arm64,
# each slice with the generated C header and module map. It first runs
# ../generate.sh, so the Swift sources in generated/ come from the same
# sources as the library (UniFFI checks that at first use). It also zips the
# framework and prints the zip's SHA-256, for a `.binaryTarget(url:checksum:)`.
#
# Needs a Mac with Xcode (xcodebuild, lipo, ditto) and rustup. Neither is
# available in this repository's CI, which never runs this script.
#
# Usage: crates/ffi/bindings/swift/build-xcframework.sh [--debug]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
workspace="$(cd "$here/../../../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$workspace/target}"

die() { printf 'build-xcframework.sh: %s\n' "$*" >&2; exit 2; }

profile=release
cargo_profile=(--release)
generate_args=(--release)
case "${1:-}" in
  "") ;;
  --debug) profile=debug; cargo_profile=(); generate_args=() ;;
  *) die "unknown argument '$1' (usage: build-xcframework.sh [--debug])" ;;
esac

[ "$(uname -s)" = "Darwin" ] || die "needs macOS with Xcode: xcodebuild and lipo exist only there."
for tool in cargo rustup xcodebuild lipo ditto shasum; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed (needs Xcode or its command line tools, and rustup)."
done

targets=(aarch64-apple-darwin x86_64-apple-darwin aarch64-apple-ios aarch64-apple-ios-sim)
installed="$(rustup target list --installed)"
missing=()
for target in "${targets[@]}"; do
  grep -qx "$target" <<<"$installed" || missing+=("$target")
done
[ "${#missing[@]}" = 0 ] || die "Rust targets missing; install them with: rustup target add ${missing[*]}"

# The objects must not require newer systems than Package.swift's platforms.
export MACOSX_DEPLOYMENT_TARGET=12.0
export IPHONEOS_DEPLOYMENT_TARGET=15.0

"$here/../generate.sh" "${generate_args[@]}"

cd "$workspace"
for target in "${targets[@]}"; do
  # The crate's own types are cdylib and lib; --crate-type adds the static
  # archive an XCFramework wants without changing Cargo.toml.
  cargo rustc --locked -p plan-ffi --lib "${cargo_profile[@]}" --target "$target" --crate-type staticlib
done
library() { printf '%s/%s/%s/libplan_ffi.a' "$target_dir" "$1" "$profile"; }

staging="$target_dir/apple-xcframework"
rm -rf "$staging"
mkdir -p "$staging/macos" "$staging/include"
lipo -create "$(library aarch64-apple-darwin)" "$(library x86_64-apple-darwin)" \
  -output "$staging/macos/libplan_ffi.a"
# Inside an XCFramework the module map must be named module.modulemap.
cp "$here/generated/PlanCheckpointFFI.h" "$staging/include/"
cp "$here/generated/PlanCheckpointFFI.modulemap" "$staging/include/module.modulemap"

framework="$here/PlanCheckpointFFI.xcframework"
rm -rf "$framework" "$framework.zip"
xcodebuild -create-xcframework \
  -library "$staging/macos/libplan_ffi.a" -headers "$staging/include" \
  -library "$(library aarch64-apple-ios)" -headers "$staging/include" \
  -library "$(library aarch64-apple-ios-sim)" -headers "$staging/include" \
  -output "$framework"

ditto -c -k --sequesterRsrc --keepParent "$framework" "$framework.zip"
echo "built $framework"
echo "zipped $framework.zip (sha256 $(shasum -a 256 "$framework.zip" | cut -d' ' -f1))"
