#!/usr/bin/env bash
# Builds the stand-in peers on the official ACP SDKs, so the suite can judge them:
#   - cli-ts: a CLI on @agentclientprotocol/sdk (npm ci, then tsc into stand-ins/cli-ts/dist);
#   - server-py: a web server on agent-client-protocol (a virtual environment in
#     target/stand-ins/venv with its pinned requirements).
# Each is rebuilt only when its lock file or sources changed. Needs Node.js with npm, and
# Python 3 with venv; exits 3 naming what is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${STAND_INS_DIR:-$here/../target/stand-ins}"
mkdir -p "$out"

# One build at a time: two test processes may ask at once.
exec 9>"$out/.lock"
flock 9

fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

for tool in node npm python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "stand-ins: \`$tool\` is needed" >&2; exit 3; }
done

cli="$here/cli-ts"
sum="$(fingerprint "$cli/package-lock.json" "$cli/tsconfig.json" "$cli"/src/*.ts)"
if [ "$(cat "$out/cli-ts.stamp" 2>/dev/null)" != "$sum" ] || [ ! -f "$cli/dist/main.js" ]; then
  (cd "$cli" && npm ci --no-audit --no-fund --loglevel=error && npx tsc -p .)
  echo "$sum" > "$out/cli-ts.stamp"
fi

server="$here/server-py"
venv="$out/venv"
sum="$(fingerprint "$server/requirements.txt")"
if [ "$(cat "$out/server-py.stamp" 2>/dev/null)" != "$sum" ] || [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$server/requirements.txt"
  echo "$sum" > "$out/server-py.stamp"
fi
echo "stand-ins ready: node $cli/dist/main.js; $venv/bin/python -m lembas_stand_in (in $server)"
