#!/usr/bin/env bash
# Builds the Python wheel for this platform (the three commands in release mode and the pytest
# plugin), and extracts its binaries for the npm platform package, so one cargo build serves both.
#
#   packages/build-wheel.sh OUT_DIR
#
# Writes OUT_DIR/wheels/lembas_doubles-VERSION-py3-none-PLATFORM.whl and OUT_DIR/bin/{fake-instance,
# fake-device,harness}. Needs Rust and Python; maturin is installed into OUT_DIR/venv-build
# (pinned). Cargo's target directory is CARGO_TARGET_DIR, else target/wheel: a CI cache of it
# makes a rebuild take seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: build-wheel.sh OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
MATURIN_VERSION="1.16.0"

"$root/packages/check-versions.sh"

if [ ! -x "$out/venv-build/bin/maturin" ]; then
  python3 -m venv "$out/venv-build"
  "$out/venv-build/bin/pip" install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION"
fi

# The packaging crate is a workspace of its own: start its lock from the workspace's, so it
# builds the very dependency versions the workspace is tested with (cargo only adds the
# packaging crate's own entry).
cp "$root/Cargo.lock" "$root/packages/python/Cargo.lock"

# Not target/ itself: the packaging crate's binaries have the doubles' own names, and would take
# the place of the workspace's target/release/fake-instance (and the rest).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/wheel}"
rm -rf "${out:?}/wheels"
# LEMBAS_WHEEL_PROFILE=dev builds the wheel from the debug build the workspace's tests already
# made (with CARGO_TARGET_DIR set to it, only the three commands are linked again): CI checks the
# packaging that way in a minute instead of a twelve-minute release build. A wheel for users is
# built in release mode, the default.
profile="${LEMBAS_WHEEL_PROFILE:-release}"
(cd "$root/packages/python" && "$out/venv-build/bin/maturin" build --profile "$profile" --out "$out/wheels")

wheel="$(ls "$out"/wheels/*.whl)"
# The wheel's scripts are the stripped release binaries: the npm platform package ships the same.
rm -rf "${out:?}/bin"
mkdir -p "$out/bin"
python3 "$root/packages/wheel-binaries.py" "$wheel" "$out/bin"
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"
