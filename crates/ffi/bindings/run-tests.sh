#!/usr/bin/env bash
# Builds the plan-ffi cdylib, regenerates the Kotlin, Swift and Python
# bindings (generate.sh), then runs the foreign-language suites against the
# real library:
#   - Kotlin: the Maven project in kotlin/ (JUnit 5 through surefire; Maven
#     pulls the Kotlin compiler, JNA and JUnit from Maven Central);
#   - Python: python/test-wheel.sh builds the wheel with maturin, installs it
#     into a fresh virtualenv and runs pytest on python/tests/ against it.
# Swift is generated only: no Swift compiler is available in CI.
#
# Every suite runs even if an earlier one failed; the script prints each
# runner's summary line and exits non-zero if any step failed.
#
# Usage: crates/ffi/bindings/run-tests.sh [--release]
# Needs: cargo, a JDK (17+), python3. If `mvn` is missing it is installed
# with apt-get only when running as root with CI=true; otherwise the script
# stops with a message saying what to install.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="$(mktemp -d "${TMPDIR:-/tmp}/plan-ffi-tests.XXXXXX")"
trap 'rm -rf "$logs"' EXIT

section() { printf '\n=== %s ===\n' "$*"; }
die() { printf 'run-tests.sh: %s\n' "$*" >&2; exit 2; }

section "generate bindings"
"$here/generate.sh" "$@" || die "generate.sh failed"

# --- tools -----------------------------------------------------------------
if ! command -v mvn >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && [ "${CI:-}" = "true" ] && command -v apt-get >/dev/null 2>&1; then
    section "installing maven (CI)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null \
      || die "apt-get install maven failed"
  else
    die "mvn (Apache Maven 3.8+) is not installed. Install it (Debian/Ubuntu: apt-get install maven; macOS: brew install maven) or run with CI=true as root to let this script install it."
  fi
fi
command -v java >/dev/null 2>&1 || die "java (a JDK 17 or newer) is not installed; Maven needs it to compile and run the Kotlin suite."
command -v python3 >/dev/null 2>&1 || die "python3 is not installed."

status=0
summaries=()

# --- Kotlin ----------------------------------------------------------------
section "Kotlin (Maven: the plan-checkpoint-ffi jar, then JUnit 5 against it)"
start=$SECONDS
# -B: batch mode (no colours or download progress). Not -q: surefire's
# "Tests run: N, Failures: 0" lines are the point. -ntp hides transfer logs.
# The reactor packages the plan-checkpoint-ffi jar (the bindings with the
# native library as a JNA resource), runs the suite with only that jar on its
# classpath, then checks the jar's keep rules by running a small app shrunk
# with ProGuard under them (kotlin/proguard-check). `verify`, not `test`: only then does the suite module get
# the packaged jar from the reactor rather than the compiled classes; `clean`
# keeps a library left in target/ by an earlier build out of that jar.
(cd "$here/kotlin" && mvn -B -ntp clean verify) 2>&1 | tee "$logs/kotlin.log"
kotlin_rc=${PIPESTATUS[0]}
kotlin_summary="$(grep -E 'Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+$' "$logs/kotlin.log" | tail -1 | sed -E 's/^\[[A-Z]+\] *//')"
[ -n "$kotlin_summary" ] || kotlin_summary="no test summary (build failed before the tests ran)"
summaries+=("Kotlin: $kotlin_summary (exit $kotlin_rc, $((SECONDS - start)) s)")
[ "$kotlin_rc" = 0 ] || status=1

# --- Python ----------------------------------------------------------------
section "Python (maturin wheel in a fresh venv + pytest)"
start=$SECONDS
# test-wheel.sh pins maturin and pytest itself (python/requirements-*.txt).
"$here/python/test-wheel.sh" "$@" 2>&1 | tee "$logs/python.log"
python_rc=${PIPESTATUS[0]}
python_summary="$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$logs/python.log" | tail -1 | sed -E 's/^=+ //; s/ =+$//')"
[ -n "$python_summary" ] || python_summary="no test summary (the wheel was not built or installed)"
summaries+=("Python: $python_summary (exit $python_rc, $((SECONDS - start)) s)")
[ "$python_rc" = 0 ] || status=1

# --- Swift -----------------------------------------------------------------
# No Swift compiler is available: the package is checked for consistency with
# the generated files and the XCFramework script, not built.
section "Swift (package consistency only: not compiled)"
"$here/swift/check-package.sh" 2>&1 | tee "$logs/swift.log"
swift_rc=${PIPESTATUS[0]}
summaries+=("Swift: generated and packaged, not compiled (no Swift compiler in CI); $(tail -1 "$logs/swift.log") (exit $swift_rc)")
[ "$swift_rc" = 0 ] || status=1

section "summary"
printf '%s\n' "${summaries[@]}"
if [ "$status" = 0 ]; then
  echo "all foreign-language suites passed"
else
  echo "FAILED: at least one suite failed" >&2
fi
exit "$status"
