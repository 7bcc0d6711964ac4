#!/usr/bin/env bash
# Checks, without a Swift toolchain, that the Swift package agrees with what
# ../generate.sh writes and what build-xcframework.sh builds:
#   - the Swift target of Package.swift is named after module_name in
#     crates/ffi/uniffi.toml, and its folder holds exactly the files the
#     target lists as sources or exclusions (a file UniFFI adds or renames
#     shows up here);
#   - the binary target is named after the module the generated module map
#     declares, the module map's header exists, and build-xcframework.sh
#     writes the XCFramework at the binary target's path from those two files;
#   - build-xcframework.sh parses (bash -n).
# Whether the Swift compiles is not checked: no Swift compiler is available.
#
# Usage: crates/ffi/bindings/swift/check-package.sh (exits non-zero on a mismatch)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
uniffi_toml="$here/../../uniffi.toml"
script="$here/build-xcframework.sh"

failures=0
fail() { printf 'check-package.sh: %s\n' "$*" >&2; failures=$((failures + 1)); }
words() { tr -d '" ' <<<"$1" | tr ',' '\n' | sed '/^$/d' | sort; }

# Package.swift as one line without comments, so each target reads as one match.
manifest="$(sed 's://.*$::' "$here/Package.swift" | tr '\n' ' ' | tr -s ' ')"
binary="$(sed -nE 's/.*\.binaryTarget\(name: "([^"]+)", path: "([^"]+)"\).*/\1 \2/p' <<<"$manifest")"
target="$(sed -nE 's/.*\.target\( name: "([^"]+)", dependencies: \[([^]]*)\], path: "([^"]+)", exclude: \[([^]]*)\], sources: \[([^]]*)\],? \).*/\1|\2|\3|\4|\5/p' <<<"$manifest")"
[ -n "$binary" ] || { echo "check-package.sh: cannot read the binaryTarget of Package.swift" >&2; exit 1; }
[ -n "$target" ] || { echo "check-package.sh: cannot read the Swift target of Package.swift" >&2; exit 1; }
read -r binary_name binary_path <<<"$binary"
IFS='|' read -r target_name target_deps target_path target_exclude target_sources <<<"$target"

module_name="$(sed -nE 's/^module_name = "([^"]+)"$/\1/p' "$uniffi_toml")"
[ "$target_name" = "$module_name" ] \
  || fail "the Swift target is '$target_name' but uniffi.toml's module_name is '$module_name'"
[ "$(words "$target_deps")" = "$binary_name" ] \
  || fail "the Swift target depends on [$target_deps], not on exactly the binary target '$binary_name'"

folder="$here/$target_path"
if [ -d "$folder" ]; then
  listed="$( (words "$target_sources"; words "$target_exclude") | sort)"
  present="$(cd "$folder" && find . -type f | sed 's:^\./::' | sort)"
  [ "$listed" = "$present" ] \
    || fail "$target_path/ holds [$(tr '\n' ' ' <<<"$present")] but the target lists [$(tr '\n' ' ' <<<"$listed")]"
  [ -f "$folder/$module_name.swift" ] || fail "no $target_path/$module_name.swift"
else
  fail "the Swift target's path '$target_path' does not exist"
fi

modulemap="$(find "$folder" -maxdepth 1 -name '*.modulemap' | head -1)"
if [ -n "$modulemap" ]; then
  declared="$(sed -nE 's/^module ([A-Za-z0-9_]+) \{.*/\1/p' "$modulemap")"
  [ "$declared" = "$binary_name" ] \
    || fail "the module map declares '$declared' but the binary target is '$binary_name'"
  header="$(sed -nE 's/^ *header "([^"]+)"$/\1/p' "$modulemap")"
  [ -f "$folder/$header" ] || fail "the module map's header '$header' is not in $target_path/"
  grep -qF "\"\$here/$target_path/$header\"" "$script" \
    || fail "build-xcframework.sh does not copy $target_path/$header"
  grep -qF "\"\$here/$target_path/$(basename "$modulemap")\"" "$script" \
    || fail "build-xcframework.sh does not copy $target_path/$(basename "$modulemap")"
else
  fail "no module map in $target_path/"
fi
grep -qF "framework=\"\$here/$binary_path\"" "$script" \
  || fail "build-xcframework.sh does not write the binary target's path '$binary_path'"
bash -n "$script" || fail "build-xcframework.sh does not parse"

if [ "$failures" = 0 ]; then
  echo "Swift package consistent: target $target_name over $target_path/, binary target $binary_name from build-xcframework.sh"
else
  exit 1
fi
