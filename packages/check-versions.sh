#!/usr/bin/env bash
# The packages follow the workspace's version: the packaging crate of the wheel
# (packages/python/Cargo.toml, which cannot inherit it, being a workspace of its own) and the npm
# package's source manifest must say the version in the root Cargo.toml's [workspace.package].
# pack.mjs stamps the npm tarballs with it anyway; this catches a release bump that missed one.
# The CI recipes (docs/recipes/*.yml) install the doubles of that version, LEMBAS_DOUBLES_VERSION,
# so a bump carries them along.
#
#   packages/check-versions.sh [TAG]
#
# With TAG (the release workflow passes the pushed tag), it must be `v` and the workspace's version.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

# The `version = "..."` line of a TOML section, without a TOML parser (CI's Python may be < 3.11).
toml_version() {
  awk -v section="[$2]" '
    $0 == section { inside = 1; next }
    /^\[/ { inside = 0 }
    inside && $1 == "version" { gsub(/"/, "", $3); print $3; exit }
  ' "$1"
}

workspace="$(toml_version "$root/Cargo.toml" workspace.package)"
wheel="$(toml_version "$root/packages/python/Cargo.toml" package)"
npm="$(node -p 'require(process.argv[1]).version' "$root/packages/npm/lembas-doubles/package.json")"
pairs=("packages/python/Cargo.toml:$wheel" "packages/npm/lembas-doubles/package.json:$npm")
for recipe in "$root"/docs/recipes/*.yml; do
  pinned="$(sed -n 's/^ *LEMBAS_DOUBLES_VERSION: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$recipe" | head -n 1)"
  pairs+=("docs/recipes/$(basename "$recipe"):${pinned:-(no LEMBAS_DOUBLES_VERSION)}")
done
status=0
if [ -n "${1:-}" ] && [ "$1" != "v$workspace" ]; then
  echo "check-versions: the tag is $1, the workspace's version is $workspace: tag v$workspace" >&2
  status=1
fi
for pair in "${pairs[@]}"; do
  if [ "${pair##*:}" != "$workspace" ]; then
    echo "check-versions: ${pair%%:*} says ${pair##*:}, the workspace says $workspace: make them equal" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "versions: $workspace everywhere"
exit "$status"
