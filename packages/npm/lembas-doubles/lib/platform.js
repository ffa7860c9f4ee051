"use strict";
// Where the native binaries are: in the platform package npm installed beside this one (the
// esbuild and biome pattern: one optional dependency a platform, each with `os` and `cpu`, so
// npm installs only the one that fits), unless an environment variable names a build of one's own.

const fs = require("node:fs");
const path = require("node:path");

const NAMES = ["fake-instance", "fake-device", "harness"];

/** The platform key of this machine: `linux-x64`, `linux-x64-musl`, `darwin-arm64`, ... */
function platformKey() {
  let key = `${process.platform}-${process.arch}`;
  // A glibc build does not run on musl (Alpine): that is a platform of its own.
  if (process.platform === "linux" && isMusl()) key += "-musl";
  return key;
}

function isMusl() {
  try {
    const report = process.report && process.report.getReport();
    const header = report && (typeof report === "string" ? JSON.parse(report) : report).header;
    return Boolean(header) && !header.glibcVersionRuntime;
  } catch {
    return false;
  }
}

/** The platform packages this version was published with, by key (from its package.json). */
function publishedPlatforms() {
  const manifest = require("../package.json");
  const found = {};
  for (const name of Object.keys(manifest.optionalDependencies || {})) {
    if (name.startsWith("@lembas-doubles/")) found[name.slice("@lembas-doubles/".length)] = name;
  }
  return found;
}

function envName(name) {
  return "LEMBAS_" + name.toUpperCase().replace(/-/g, "_");
}

/**
 * The path of `fake-instance`, `fake-device` or `harness`: LEMBAS_FAKE_INSTANCE (...) when set,
 * else the binary in this platform's package. Throws an Error saying what to do when there is
 * none for this platform, or when the platform package was not installed.
 */
function binaryPath(name) {
  if (!NAMES.includes(name)) throw new Error(`lembas-doubles: ${name} is not one of ${NAMES.join(", ")}`);
  const override = process.env[envName(name)];
  if (override) return override;
  const key = platformKey();
  const platforms = publishedPlatforms();
  const pkg = platforms[key];
  const fromSource =
    `build ${name} from source (cargo install --path ${name === "harness" ? "cli" : name} in the doubles' repository) ` +
    `and name it in ${envName(name)}`;
  if (!pkg) {
    const list = Object.keys(platforms).sort().join(", ") || "none";
    throw new Error(
      `lembas-doubles: no prebuilt binaries for this platform (${key}); this version has them for: ${list}. ` +
        `To run it here, ${fromSource}.`,
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    throw new Error(
      `lembas-doubles: the binaries for ${key} come in the optional dependency ${pkg}, which is not installed ` +
        `(was it installed with --omit=optional or --no-optional, or from another platform's lockfile?). ` +
        `Install it (npm i -D ${pkg}@${require("../package.json").version}), or ${fromSource}.`,
    );
  }
  const file = path.join(dir, "bin", name + (process.platform === "win32" ? ".exe" : ""));
  if (!fs.existsSync(file)) throw new Error(`lembas-doubles: ${pkg} has no ${path.basename(file)} (a broken package?)`);
  return file;
}

module.exports = { NAMES, binaryPath, platformKey };
