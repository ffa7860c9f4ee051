#!/usr/bin/env bash
# Packs the npm packages for this platform from the binaries `packages/build-wheel.sh OUT_DIR`
# left in OUT_DIR/bin: `lembas-doubles` (the helper and the commands' launchers) and
# `@lembas-doubles/PLATFORM` (the binaries), so `npm install` of both works as the registry's
# would.
#
#   packages/build-npm.sh OUT_DIR
#
# Writes OUT_DIR/npm/*.tgz and OUT_DIR/npm/tarballs.txt. Needs Node.js and npm, no Rust.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: build-npm.sh OUT_DIR}"
out="$(cd "$out" && pwd)"
[ -x "$out/bin/fake-instance" ] || { echo "build-npm: no binaries in $out/bin: run packages/build-wheel.sh $out first" >&2; exit 2; }
key="$(node -p 'require(process.argv[1]).platformKey()' "$root/packages/npm/lembas-doubles/lib/platform.js")"
rm -rf "$out/npm"
mkdir -p "$out/npm"
node "$root/packages/npm/pack.mjs" --out "$out/npm" --platform "$key=$out/bin"
