#!/usr/bin/env bash
# Builds the plan-ffi wheel with maturin and runs the Python suite against the
# installed package, as a Python user would get it:
#   1. a fresh virtualenv gets the maturin pinned in requirements-build.txt
#      and builds the wheel (cargo reuses the workspace's target directory,
#      so only the plan-ffi crate itself is compiled again, and the
#      uniffi-bindgen maturin runs is the one generate.sh built: the script
#      fails if maturin compiles it again);
#   2. a second fresh virtualenv gets pytest (requirements-test.txt) and the
#      wheel, through pip, as any user installs it;
#   3. pytest runs tests/ from an empty temporary directory with
#      --import-mode=importlib and without PYTHONPATH, so the source tree
#      cannot be imported; tests/test_installed_package.py checks that
#      plan_ffi, and the native library it loaded, come from site-packages.
#
# Usage: crates/ffi/bindings/python/test-wheel.sh [--release]
# Needs: cargo, python3 with the venv module, and PyPI for pip.
# Exits with pytest's status, 2 if the wheel could not be built or
# installed, or 3 if maturin compiled its own uniffi-bindgen instead of
# reusing the one built as generate.sh builds it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
profile=()
if [ "${1:-}" = "--release" ]; then
  profile=(--release)
fi

die() { printf 'test-wheel.sh: %s\n' "$*" >&2; exit 2; }
step() { printf -- '--- %s\n' "$*"; }

command -v python3 >/dev/null 2>&1 || die "python3 is not installed."
work="$(mktemp -d "${TMPDIR:-/tmp}/plan-ffi-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Nothing from the caller's environment may put other modules on the path.
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV
export PYTHONNOUSERSITE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# The suite runs from the source tree's tests/; keep it free of __pycache__.
export PYTHONDONTWRITEBYTECODE=1

step "build venv: maturin from requirements-build.txt"
python3 -m venv "$work/build-venv" \
  || die "python3 -m venv failed (Debian/Ubuntu: apt-get install python3-venv)"
"$work/build-venv/bin/pip" install --quiet -r "$here/requirements-build.txt" \
  || die "could not install maturin with pip"
"$work/build-venv/bin/maturin" --version

step "uniffi-bindgen, built as generate.sh builds it (nothing to do after generate.sh)"
start=$SECONDS
bindgen="$("$here/../build-uniffi-bindgen.sh" 2>"$work/bindgen.log")" \
  || { cat "$work/bindgen.log" >&2; die "could not build uniffi-bindgen"; }
cat "$work/bindgen.log"
if grep -Eq '^ *Compiling ' "$work/bindgen.log"; then how=compiled; else how="reused, nothing compiled"; fi
printf 'uniffi-bindgen: %s (%d s)\n' "$how" "$((SECONDS - start))"
sha256() { python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"; }
bindgen_sha256="$(sha256 "$bindgen")"

step "maturin build ${profile[*]:-(debug)}"
start=$SECONDS
# maturin reads pyproject.toml here: the crate, uniffi bindings, names. Its
# cargo output is kept (uncoloured, not quiet) for the check below.
(cd "$here" && CARGO_TERM_COLOR=never CARGO_TERM_QUIET=false \
  "$work/build-venv/bin/maturin" build "${profile[@]}" --locked --out "$work/dist") 2>&1 \
  | tee "$work/maturin.log" || die "maturin build failed"
# maturin runs `cargo run --bin uniffi-bindgen`: it must find the build above
# fresh. A `Compiling uniffi-bindgen` or `Compiling uniffi_bindgen` here, or
# another binary in the build's place, means it built the generator a second
# time (see ../build-uniffi-bindgen.sh for why that happens).
if grep -E '^ *Compiling (plan-)?uniffi[-_]bindgen ' "$work/maturin.log" >&2; then
  printf 'test-wheel.sh: maturin compiled uniffi-bindgen again instead of reusing the build of ../build-uniffi-bindgen.sh\n' >&2
  exit 3
fi
if [ "$(sha256 "$bindgen")" != "$bindgen_sha256" ]; then
  printf 'test-wheel.sh: maturin replaced %s with another build of uniffi-bindgen\n' "$bindgen" >&2
  exit 3
fi
wheels=("$work"/dist/plan_ffi-*.whl)
[ "${#wheels[@]}" = 1 ] && [ -f "${wheels[0]}" ] || die "expected one wheel in $work/dist, found: ${wheels[*]}"
wheel="${wheels[0]}"
printf 'built %s (%s) in %d s\n' "$(basename "$wheel")" "$(du -h "$wheel" | cut -f1)" "$((SECONDS - start))"

step "test venv: pytest from requirements-test.txt, then the wheel"
python3 -m venv "$work/test-venv" || die "python3 -m venv failed"
"$work/test-venv/bin/pip" install --quiet -r "$here/requirements-test.txt" \
  || die "could not install pytest with pip"
# --no-index: the wheel has no dependencies, and a plan-ffi from an index
# must never stand in for the one just built.
"$work/test-venv/bin/pip" install --quiet --no-index "$wheel" || die "pip could not install $wheel"

step "plan-checkpoint, the sandbox helper a Python host passes"
# The README tells Python hosts to pass the installed plan-checkpoint binary
# as HostConfig(sandbox_helper=...); a test does exactly that.
(cd "$here" && cargo build --locked -p plan-checkpoint "${profile[@]}") || die "cargo build -p plan-checkpoint failed"
target_dir="$(cd "$here" && cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')" \
  || die "cargo metadata failed"
export PLAN_CHECKPOINT_BIN="$target_dir/$([ "${#profile[@]}" = 0 ] && echo debug || echo release)/plan-checkpoint"
[ -x "$PLAN_CHECKPOINT_BIN" ] || die "no plan-checkpoint binary at $PLAN_CHECKPOINT_BIN"

step "pytest against the installed package"
mkdir "$work/run"
cd "$work/run"
"$work/test-venv/bin/python" -c 'import plan_ffi; print("plan_ffi from", plan_ffi.__file__)'
# The pytest script (not `python -m pytest`, which would put the working
# directory on sys.path); -p no:cacheprovider writes nothing into tests/.
"$work/test-venv/bin/pytest" -p no:cacheprovider --import-mode=importlib -ra "$here/tests"
