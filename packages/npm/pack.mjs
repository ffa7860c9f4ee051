#!/usr/bin/env node
// Assembles the npm packages from built binaries and packs them:
//
//   node packages/npm/pack.mjs --out DIR --platform linux-x64=target/release [--platform KEY=DIR ...]
//
// For each --platform, KEY (`linux-x64`, `linux-arm64`, `linux-x64-musl`, `darwin-arm64`,
// `win32-x64`, ...) names the platform and DIR holds its fake-instance, fake-device and harness.
// It writes `@lembas-doubles/KEY` (the binaries, with `os`, `cpu` and `libc` so npm installs it
// only there) and `lembas-doubles` (the helper and the commands' launchers) whose
// optionalDependencies list exactly the platforms packed, all at the workspace's version (from
// the root Cargo.toml), then runs `npm pack` on each into DIR. The sources under packages/npm
// are not modified: everything is assembled in DIR/stage.

import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const NAMES = ["fake-instance", "fake-device", "harness"];

function usage(message) {
  console.error(`pack.mjs: ${message}\nusage: node packages/npm/pack.mjs --out DIR --platform KEY=BINDIR [--platform KEY=BINDIR ...]`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { out: null, platforms: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => argv[++i] ?? usage(`${arg} needs a value`);
    if (arg === "--out") options.out = path.resolve(value());
    else if (arg === "--platform") {
      const [key, dir] = value().split("=");
      if (!key || !dir) usage("--platform is KEY=BINDIR");
      options.platforms.push({ key, dir: path.resolve(dir) });
    } else usage(`unknown argument ${arg}`);
  }
  if (!options.out) usage("--out is required");
  if (!options.platforms.length) usage("give at least one --platform");
  return options;
}

/** The workspace's version: `version` in the root Cargo.toml's [workspace.package]. */
function workspaceVersion() {
  const toml = readFileSync(path.join(repo, "Cargo.toml"), "utf8");
  const section = toml.split(/^\[/m).find((part) => part.startsWith("workspace.package]"));
  const match = section && section.match(/^version\s*=\s*"([^"]+)"/m);
  if (!match) throw new Error("no version in [workspace.package] of Cargo.toml");
  return match[1];
}

/** `os`, `cpu` and `libc` of a platform key, as npm's package.json fields take them. */
function platformFields(key) {
  const [os, cpu, libc] = key.split("-");
  if (!os || !cpu) usage(`${key} is not a platform key like linux-x64`);
  const fields = { os: [os], cpu: [cpu] };
  if (os === "linux") fields.libc = [libc === "musl" ? "musl" : "glibc"];
  return fields;
}

function pack(dir, out) {
  // --json says the tarball's name; npm's own output goes to the terminal as usual.
  const said = execFileSync("npm", ["pack", "--json", "--pack-destination", out], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const file = path.join(out, JSON.parse(said)[0].filename);
  console.log(`${path.basename(file)}: ${(statSync(file).size / 1e6).toFixed(2)} MB`);
  return file;
}

const options = parseArgs(process.argv.slice(2));
const version = workspaceVersion();
const stage = path.join(options.out, "stage");
rmSync(stage, { recursive: true, force: true });
mkdirSync(stage, { recursive: true });

const optionalDependencies = {};
const tarballs = [];
for (const { key, dir } of options.platforms) {
  const name = `@lembas-doubles/${key}`;
  const target = path.join(stage, key);
  mkdirSync(path.join(target, "bin"), { recursive: true });
  const exe = key.startsWith("win32-") ? ".exe" : "";
  for (const binary of NAMES) {
    const from = path.join(dir, binary + exe);
    if (!existsSync(from)) usage(`${from} is missing (build it with cargo build --release first)`);
    copyFileSync(from, path.join(target, "bin", binary + exe));
    chmodSync(path.join(target, "bin", binary + exe), 0o755);
  }
  const manifest = {
    name,
    version,
    description: `The LLeMbas link doubles' binaries for ${key}; installed by lembas-doubles on that platform only.`,
    license: "MIT OR Apache-2.0",
    ...platformFields(key),
    files: ["bin/"],
    // Yarn's Plug'n'Play must put the binaries on disk to run them.
    preferUnplugged: true,
  };
  writeFileSync(path.join(target, "package.json"), JSON.stringify(manifest, null, 2) + "\n");
  writeFileSync(
    path.join(target, "README.md"),
    `# ${name}\n\nThe \`fake-instance\`, \`fake-device\` and \`harness\` binaries of [lembas-doubles](https://www.npmjs.com/package/lembas-doubles) ${version} for ${key}. Install \`lembas-doubles\`, which depends on this package on this platform only.\n`,
  );
  optionalDependencies[name] = version;
  tarballs.push(pack(target, options.out));
}

const main = path.join(stage, "lembas-doubles");
cpSync(path.join(here, "lembas-doubles"), main, { recursive: true });
const manifestPath = path.join(main, "package.json");
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
manifest.version = version;
manifest.optionalDependencies = optionalDependencies;
writeFileSync(manifestPath, JSON.stringify(manifest, null, 2) + "\n");
tarballs.unshift(pack(main, options.out));

// The tarballs, one a line, for the caller (CI installs them together).
writeFileSync(path.join(options.out, "tarballs.txt"), tarballs.join("\n") + "\n");
