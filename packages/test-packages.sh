#!/usr/bin/env bash
# What CI does with the packages, as three jobs (run one, or all in order):
#
#   packages/test-packages.sh build    # the wheel (and the binaries it carries), with Rust
#   packages/test-packages.sh python   # pip install the wheel into a fresh venv, no Rust on PATH, pytest
#   packages/test-packages.sh npm      # pack the npm tarballs, npm i -D them into a consumer project, vitest
#   packages/test-packages.sh          # all three
#
# The jobs install the packages as the front page (README.md) tells a user to, running its
# install block's lines as written: from a project folder beside a fresh clone of this repository
# named lembas-doubles, whose target/packages then holds wheels/, bin/ and npm/*.tgz. Everything
# goes under $LEMBAS_PACKAGES_OUT (default: $CARGO_TARGET_DIR/packages, else target/packages):
# front-door/ (the clone and the projects) and each job's reports. The python and npm jobs only
# read what the build job wrote, so CI can run them on machines with Python or Node and no Rust.
# Each job prints its wall time and the artifacts' sizes. Worth caching in CI: the wheel's cargo target
# directory (CARGO_TARGET_DIR, else target/wheel: a warm rebuild takes seconds), ~/.cache/pip,
# ~/.npm and ~/.cargo/registry.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${LEMBAS_PACKAGES_OUT:-${CARGO_TARGET_DIR:-$root/target}/packages}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The PATH of a user without Rust: the job's own tools first, then the system's, and nothing from
# ~/.cargo (the test below proves it).
NO_RUST_PATH="/usr/local/bin:/usr/bin:/bin"
# Vitest 3 with Vite 6: the newest that still run on Node 18, which is what Debian 12 (CI's
# system) packages; vitest 4 and vite 7 need Node 20.
VITEST_VERSION="3.2.4"
VITE_VERSION="6.4.1"
TYPESCRIPT_VERSION="5.9.3"
TYPES_NODE_VERSION="18"
PYTEST_VERSION="8.3.4"

size() { du -h "$1" | cut -f1; }

timed() {
  local job="$1" start end
  shift
  start=$(date +%s%N)
  "$@"
  end=$(date +%s%N)
  # Whole nanoseconds in shell arithmetic: no bc on a fresh machine.
  local tenths=$(((end - start) / 100000000))
  printf '%s job: %d.%d s wall\n' "$job" $((tenths / 10)) $((tenths % 10)) | tee -a "$out/times.txt"
}

# The README's lay-out: a project folder beside the clone; the packages under the clone's target.
front="$out/front-door"
packages="$front/lembas-doubles/target/packages"

# The code block of README.md under the comment `<!-- checked: MARKER...`.
readme_block() {
  awk -v marker="<!-- checked: $1" '
    index($0, marker) == 1 { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' "$root/README.md"
}

# Runs, in folder $1, the lines of the README's install block whose command matches $2 (an
# extended regex), with the environment of the rest of the arguments; fails when there is none.
run_readme_install() {
  local dir="$1" pattern="$2" lines
  shift 2
  lines="$(readme_block "run by packages/test-packages.sh (build, python and npm jobs)" | grep -E "^($pattern)" || true)"
  if [ -z "$lines" ]; then
    echo "test-packages: README.md's install block has no line matching $pattern" >&2
    exit 1
  fi
  printf 'README.md: %s\n' "$lines"
  (cd "$dir" && env "$@" sh -ec "$lines")
}

build() {
  rm -rf "$front"
  mkdir -p "$front/project"
  # The clone is made from this checkout (what CI tests), and builds with this job's cargo
  # settings (CARGO_TARGET_DIR, LEMBAS_WHEEL_PROFILE) from the environment.
  run_readme_install "$front/project" "git clone|[^ ]*build-wheel.sh" LEMBAS_DOUBLES_GIT="$root"
  ls "$packages"/wheels/*.whl "$packages"/bin/fake-instance >/dev/null
}

no_rust() {
  # Fails the job when a Rust toolchain is reachable: the point is that users need none.
  if env PATH="$1" sh -c 'command -v cargo || command -v rustc' >/dev/null; then
    echo "test-packages: cargo or rustc is on the job's PATH ($1)" >&2
    exit 1
  fi
}

python_job() {
  local wheel venv
  wheel="$(ls "$packages"/wheels/*.whl)"
  venv="$out/venv-test"
  rm -rf "$venv" "$out/python-reports"
  mkdir -p "$out/python-reports"
  python3 -m venv "$venv"
  local path="$venv/bin:$NO_RUST_PATH"
  no_rust "$path"
  # As a user installs it: the README's line for the wheel, then pytest, nothing else (the
  # plugin comes with the wheel).
  run_readme_install "$front/project" "pip install" PATH="$path"
  env PATH="$path" pip install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION"
  # The commands are on the venv's PATH, from the wheel.
  for name in fake-instance fake-device harness; do
    [ "$(env PATH="$path" sh -c "command -v $name")" = "$venv/bin/$name" ]
  done
  env PATH="$path" fake-instance --version
  # The tests import the installed package, not the sources beside them.
  env PATH="$path" python -c 'import lembas_doubles, sys; f = lembas_doubles.__file__; print("lembas_doubles from", f); sys.exit("site-packages" not in f)'
  # Run from a folder outside the sources, so the package imported is the installed one.
  (cd "$out/python-reports" && env -u LEMBAS_FAKE_INSTANCE -u LEMBAS_FAKE_DEVICE -u LEMBAS_HARNESS \
    PATH="$path" pytest "$root/packages/python/tests" -p no:cacheprovider \
      --rootdir "$root/packages/python" --lembas-protocols 1,2 --lembas-specs 1.0.0,1.1.0 \
      --junitxml="$out/python-reports/junit.xml" -q)
  # The pytest recipe (docs/recipes/pytest), as a user's project runs it in every cell: the
  # plugin from the installed wheel, its server under test the stand-in fake-instance the wheel
  # installed. Its four tests run 14 times (one fixes protocol 1, so runs in two cells only),
  # and each must pass: a skip would be a behaviour the recipe no longer shows.
  # The README's pytest command for a web server's tests, with where the tests are and the reports.
  local pytest_command
  pytest_command="$(readme_block "run by packages/test-packages.sh (python job)")"
  [ -n "$pytest_command" ] || { echo "test-packages: README.md has no pytest command" >&2; exit 1; }
  printf 'README.md: %s\n' "$pytest_command"
  (cd "$out/python-reports" && env -u LEMBAS_FAKE_DEVICE -u LEMBAS_HARNESS \
    LEMBAS_FAKE_INSTANCE="$venv/bin/fake-instance" PATH="$path" \
    sh -ec "$pytest_command \"\$@\"" pytest "$root/docs/recipes/pytest" \
      -p no:cacheprovider --rootdir "$root/docs/recipes/pytest" \
      --junitxml="$out/python-reports/recipe-junit.xml" -q -rs)
  env PATH="$path" python - "$out/python-reports/recipe-junit.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

# pytest's own suite (the plugin adds each double's beside it).
suite = next(s for s in ET.parse(sys.argv[1]).getroot().iter("testsuite") if s.get("name") == "pytest")
counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
if counts != {"tests": 14, "failures": 0, "errors": 0, "skipped": 0}:
    sys.exit(f"the pytest recipe ran {counts}: 14 runs of its four tests must all pass")
print("pytest recipe: all 14 runs of its four tests passed")
PY
  echo "wheel: $(basename "$wheel") $(size "$wheel")"
}

npm_job() {
  local consumer
  # A TypeScript CLI's project beside the clone, as the README lays it out.
  consumer="$front/consumer-test"
  rm -rf "$consumer"
  cp -r "$root/packages/npm/consumer-test" "$consumer"
  local path="$NO_RUST_PATH"
  no_rust "$path"
  # As a user installs it: the README's lines (pack this platform's tarballs, install both: the
  # platform one satisfies the main one's optional dependency, as the registry would), then
  # vitest from the registry.
  run_readme_install "$consumer" "[^ ]*build-npm.sh|npm install" PATH="$path"
  (cd "$consumer" && env PATH="$path" npm install --save-dev --no-audit --no-fund --loglevel=error \
    "vitest@$VITEST_VERSION" "vite@$VITE_VERSION" "typescript@$TYPESCRIPT_VERSION" "@types/node@$TYPES_NODE_VERSION")
  (cd "$consumer" && env -u LEMBAS_FAKE_INSTANCE -u LEMBAS_FAKE_DEVICE -u LEMBAS_HARNESS PATH="$path" sh -c \
    'npx tsc --noEmit -p . && npx vitest run --reporter=default --reporter=junit --outputFile.junit=junit.xml')
  for tarball in "$packages"/npm/*.tgz; do echo "tarball: $(basename "$tarball") $(size "$tarball")"; done
}

case "${1:-all}" in
  build) timed build build ;;
  python) timed python python_job ;;
  npm) timed npm npm_job ;;
  all)
    rm -f "$out/times.txt"
    timed build build
    timed python python_job
    timed npm npm_job
    cat "$out/times.txt"
    ;;
  *) echo "usage: $0 [build|python|npm|all]" >&2; exit 2 ;;
esac
