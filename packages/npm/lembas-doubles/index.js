"use strict";
/**
 * Start the LLeMbas link doubles from a vitest (or jest) test, drive them over their control
 * API, and take their verdict.
 *
 *   import { expect, test } from "vitest";
 *   import { startFakeInstance } from "lembas-doubles";
 *
 *   test("the CLI negotiates", async () => {
 *     const instance = await startFakeInstance({ scenario: "negotiate.yaml", protocol: 1 });
 *     const cli = startMyCli(["serve", "--url", instance.url, "--token", instance.token]);
 *     const verdict = await instance.verdict();
 *     cli.kill();
 *     expect(verdict.verdict, verdict.report).toBe("passed");
 *   });
 *
 * The binaries come from this platform's optional dependency (`@lembas-doubles/linux-x64`, ...),
 * or from LEMBAS_FAKE_INSTANCE, LEMBAS_FAKE_DEVICE and LEMBAS_HARNESS when set.
 */

const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const fsp = require("node:fs/promises");
const http = require("node:http");
const os = require("node:os");
const path = require("node:path");
const { binaryPath, platformKey } = require("./lib/platform");

const DEFAULT_TOKEN = "lembas-test-token";
const DEFAULT_PROTOCOL = 2;
const DEFAULT_SPEC = "1.1.0";
const EXIT_INTERRUPTED = 6;

/** Doubles still running, ended if the test process exits without stopping them. */
const running = new Set();
process.on("exit", () => {
  for (const double of running) double._child.kill("SIGKILL");
});

/** The control API refused a request; `error` says why. */
class ControlError extends Error {
  constructor(status, error, body) {
    super(`control API: ${status}: ${error}`);
    this.name = "ControlError";
    this.status = status;
    this.error = error;
    this.body = body;
  }

  /** The action needs what the peer never claimed (a capability it did not list). */
  get notApplicable() {
    return Boolean(this.body && this.body.not_applicable);
  }
}

/** What a double said of its peer. */
class Verdict {
  constructor(fields) {
    Object.assign(this, fields);
  }

  get passed() {
    return this.verdict === "passed";
  }

  /**
   * Throws an Error carrying the double's report unless the peer passed. "Not applicable" (the
   * scenario needs what the peer never claimed, so it was not judged) is no failure, as the
   * commands exit 0 and the pytest plugin skips: it returns, unless `strict` (this call's, else
   * the run's own `strict` option). `allowNotApplicable: false` is the old spelling of
   * `strict: true`.
   */
  assertPassed({ strict, allowNotApplicable } = {}) {
    if (strict === undefined && allowNotApplicable !== undefined) strict = !allowNotApplicable;
    if (strict === undefined) strict = Boolean(this.strict);
    if (this.verdict === "not_applicable" && !strict) return;
    if (this.verdict !== "passed") throw new Error(`${this.double}: ${this.verdict}\n${this.report}`);
  }

  /** Throws unless the peer was caught breaking `rule`. */
  assertFailedOn(rule) {
    if (this.verdict !== "failed" || !this.brokenRules.includes(rule)) {
      throw new Error(`${this.double}: expected a failure on ${rule}, got ${this.verdict} [${this.brokenRules}]\n${this.report}`);
    }
  }
}

/** Hooks as functions: a loopback HTTP endpoint the double's `http` hooks call. */
class HookServer {
  constructor(hooks) {
    this.hooks = hooks;
    this.errors = [];
    this.server = http.createServer((request, response) => this._handle(request, response));
  }

  listen() {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", () => resolve(this.server.address().port));
    });
  }

  async _handle(request, response) {
    const name = decodeURIComponent(request.url.split("/").pop());
    let status = 200;
    let answer;
    try {
      let body = "";
      for await (const chunk of request) body += chunk;
      // `"{action}"` alone is `{name: fields}` itself; an older double sent it as a JSON
      // string, decoded once more here.
      let action = JSON.parse(body || "{}").action ?? {};
      if (typeof action === "string") action = JSON.parse(action);
      const fields = action[name] ?? null;
      answer = (await this.hooks[name](fields)) ?? {};
    } catch (e) {
      this.errors.push(`${name}: ${e && e.stack ? e.stack : e}`);
      status = 500;
      answer = { error: String(e) };
    }
    const data = JSON.stringify(answer);
    response.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) });
    response.end(data);
  }

  close() {
    this.server.close();
  }
}

/** Gives the `--hooks` file (and the server its function hooks need). */
async function writeHooks(hooks, file) {
  if (typeof hooks === "string") return { file: hooks, server: null };
  const hasFunctions = Object.values(hooks).some((hook) => typeof hook === "function");
  const server = hasFunctions ? new HookServer(hooks) : null;
  const port = server ? await server.listen() : 0;
  const entries = {};
  for (const [name, hook] of Object.entries(hooks)) {
    entries[name] =
      typeof hook === "function"
        ? { http: { url: `http://127.0.0.1:${port}/hooks/${encodeURIComponent(name)}`, json: { action: "{action}" } } }
        : hook;
  }
  // JSON is YAML: the double reads this as a hooks file.
  await fsp.writeFile(file, JSON.stringify(entries, null, 2));
  return { file, server };
}

/** One run of a double: its URLs and token, its control API, its verdict. */
class Double {
  constructor(name, child, info) {
    this.name = name;
    this._child = child;
    /** fake-instance: its own URL (for the CLI under test); fake-device: the server it dials. */
    this.url = info.url;
    /** The device token: the one fake-instance accepts, or the one fake-device says. */
    this.token = info.token;
    this.protocol = info.protocol;
    this.spec = info.spec;
    this.scenario = info.scenario;
    this.workdir = info.workdir;
    /** fake-device: the directory it offers as its remote root. */
    this.root = info.root;
    this.controlUrl = null;
    this.journalPath = path.join(info.workdir, "journal.jsonl");
    this.reportPaths = { json: path.join(info.workdir, "report.json"), junit: path.join(info.workdir, "report.xml") };
    this._controlToken = info.controlToken;
    this._strict = Boolean(info.strict);
    this._hookServer = info.hookServer;
    this._stdout = [];
    this._stderr = [];
    this._verdict = null;
    this._waiters = new Set();
    this._exit = null;
    this.exited = new Promise((resolve) => {
      // `close`, not `exit`: the streams are read to their end, so the report is whole.
      child.on("close", (code, signal) => {
        this._exit = { code, signal };
        running.delete(this);
        this._wake();
        resolve(this._exit);
      });
    });
    child.on("error", (e) => {
      this._spawnError = e;
      this._wake();
    });
    this._collect(child.stdout, this._stdout);
    this._collect(child.stderr, this._stderr);
    running.add(this);
  }

  _collect(stream, into) {
    let partial = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop();
      into.push(...lines);
      this._wake();
    });
    stream.on("end", () => {
      if (partial) into.push(partial);
      this._wake();
    });
  }

  _wake() {
    for (const wake of this._waiters) wake();
  }

  /** Resolves once the ready lines are out: `listening URL` (fake-instance) and `control URL token=…`. */
  _ready(timeoutMs) {
    const needListening = this.name === "fake-instance";
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error(`${this.name} was not ready within ${timeoutMs} ms:\n${this.output()}`)), timeoutMs);
      const check = () => {
        for (const line of this._stdout) {
          if (needListening && !this.url && line.startsWith("listening ")) this.url = line.slice(10).trim();
          else if (!this.controlUrl && line.startsWith("control ")) this.controlUrl = line.split(" ")[1];
        }
        if (this.controlUrl && (this.url || !needListening)) return finish();
        if (this._spawnError) return finish(new Error(`cannot start ${this.name}: ${this._spawnError.message}`));
        // A quick scenario may have ended already: its lines were read before `close`.
        if (this._exit) {
          finish(new Error(`${this.name} ended (exit ${this._exit.code ?? this._exit.signal}) before it was ready:\n${this.output()}`));
        }
      };
      const finish = (error) => {
        clearTimeout(timer);
        this._waiters.delete(check);
        if (error) {
          this._child.kill("SIGKILL");
          if (this._hookServer) this._hookServer.close();
          reject(error);
        } else resolve(this);
      };
      this._waiters.add(check);
      check();
    });
  }

  /** What the double printed: its stdout (the report), then its stderr. */
  output() {
    const out = this._stdout.filter((line) => !line.startsWith("listening ") && !line.startsWith("control "));
    let text = [...out, ...this._stderr].join("\n");
    if (this._hookServer && this._hookServer.errors.length) text += `\nhooks raised:\n${this._hookServer.errors.join("\n")}`;
    return text;
  }

  get running() {
    return this._exit === null;
  }

  async _request(method, route, body, timeoutMs = 40_000) {
    let response;
    try {
      response = await fetch(this.controlUrl + route, {
        method,
        headers: { Authorization: `Bearer ${this._controlToken}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      // Refused while the run ends (its control API closes just before the process exits):
      // give the exit a moment to arrive, so callers can tell "ended" from "did not answer".
      let timer;
      await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, 2_000)))]);
      clearTimeout(timer);
      throw new Error(`${this.name}'s control API ${this.running ? "did not answer" : "ended"}: ${e.message}`);
    }
    const text = await response.text();
    let said = null;
    try {
      said = text ? JSON.parse(text) : null;
    } catch {
      said = { error: text };
    }
    if (!response.ok) throw new ControlError(response.status, (said && said.error) || "", said);
    return said;
  }

  /** `GET /v1/state`: the cell, the scenario's step, links, findings, the double's own state. */
  state() {
    return this._request("GET", "/v1/state");
  }

  /**
   * `GET /v1/journal`: `{ entries, last }`, the messages after `after`. Once the double has
   * ended, the page is read from its `--journal` file, with the same entries.
   */
  async journal({ after = 0, waitMs = 0, limit } = {}) {
    if (this.running) {
      const query = new URLSearchParams({ after: String(after), wait_ms: String(waitMs) });
      if (limit) query.set("limit", String(limit));
      try {
        return await this._request("GET", `/v1/journal?${query}`, undefined, waitMs + 10_000);
      } catch (e) {
        if (this.running || e instanceof ControlError) throw e;
      }
    }
    const entries = (await this._journalFile()).filter((entry) => entry.seq > after).slice(0, limit || 50);
    return { entries, last: entries.length ? entries[entries.length - 1].seq : after };
  }

  async _journalFile() {
    let text;
    try {
      text = await fsp.readFile(this.journalPath, "utf8");
    } catch {
      return [];
    }
    return text.split("\n").filter(Boolean).map((line) => JSON.parse(line));
  }

  /**
   * The first journal entry after `after` whose message has this `method` (and `direction`:
   * `in`, `out`, `event`), for which `where(entry)` holds; long-polls up to `timeoutMs`.
   */
  async waitFor(method, { where, direction, after = 0, timeoutMs = 10_000 } = {}) {
    const deadline = Date.now() + timeoutMs;
    const seen = [];
    for (;;) {
      const left = deadline - Date.now();
      const page = await this.journal({ after, waitMs: Math.max(0, Math.min(left, 5_000)) });
      for (const entry of page.entries) {
        seen.push(entry);
        const msg = entry.msg || {};
        if (method != null && msg.method !== method) continue;
        if (direction != null && entry.dir !== direction) continue;
        if (where && !where(entry)) continue;
        return entry;
      }
      after = Math.max(after, page.last);
      if (Date.now() >= deadline || (!this.running && page.entries.length === 0)) {
        const tail = seen.slice(-10).map((entry) => JSON.stringify(entry.msg).slice(0, 200)).join("\n");
        throw new Error(`${this.name}: no ${method || "entry"} in the journal within ${timeoutMs} ms; the last ones:\n${tail || "(none)"}`);
      }
    }
  }

  /** `POST /v1/act`: one action of the double's own side (`{ open_chat: {} }`); its result. */
  async act(action, { withinMs } = {}) {
    const route = withinMs === undefined ? "/v1/act" : `/v1/act?within_ms=${withinMs}`;
    const answer = await this._request("POST", route, action, (withinMs ?? 10_000) + 30_000);
    return answer.result;
  }

  /** `POST /v1/inject`: a raw message on a link (malformed `text` too); gives the link. */
  async inject({ text, message, link } = {}) {
    const answer = await this._request("POST", "/v1/inject", { text, message, link });
    return answer.link;
  }

  /** `POST /v1/signals/NAME`: raises the signal a `wait_for_signal` step waits on. */
  async signal(name) {
    await this._request("POST", `/v1/signals/${encodeURIComponent(name)}`, {});
  }

  /**
   * Waits for the scenario to end and gives its verdict (the double exits with it). A run
   * without a scenario never ends by itself: it is stopped, judged on its monitors' findings.
   */
  async verdict({ timeoutMs = 120_000 } = {}) {
    if (this._verdict) return this._verdict;
    if (!this.scenario) return this.stop();
    let timer;
    const timedOut = await Promise.race([
      this.exited.then(() => false),
      new Promise((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) await this._terminate();
    this._verdict = await this._readVerdict(timedOut ? `no verdict within ${timeoutMs} ms: stopped` : null);
    this._close();
    return this._verdict;
  }

  /**
   * Ends the run now and gives its verdict: a scenario still running is `interrupted` (never a
   * pass); a run without one is judged on the findings its control API says it has.
   */
  async stop({ graceMs = 10_000 } = {}) {
    if (this._verdict) return this._verdict;
    let findings = [];
    if (!this.scenario && this.running) {
      try {
        findings = (await this.state()).findings || [];
      } catch {
        findings = [];
      }
    }
    await this._terminate(graceMs);
    this._verdict = this.scenario ? await this._readVerdict(null) : this._simulatedVerdict(findings);
    this._close();
    return this._verdict;
  }

  async [Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose")]() {
    await this.stop();
  }

  async _terminate(graceMs = 10_000) {
    if (!this.running) return;
    // SIGTERM lets the double end what it started (`exec`) and print its report.
    this._child.kill("SIGTERM");
    let timer;
    const ended = await Promise.race([
      this.exited.then(() => true),
      new Promise((resolve) => (timer = setTimeout(() => resolve(false), graceMs))),
    ]);
    clearTimeout(timer);
    if (!ended) {
      this._child.kill("SIGKILL");
      await this.exited;
    }
  }

  _close() {
    // Once the double has ended nothing calls its hooks; their errors stay for the report.
    if (this._hookServer && this._hookServer.server.listening) this._hookServer.close();
  }

  async _readVerdict(why) {
    const code = this._exit ? this._exit.code ?? -1 : -1;
    const report = this.output();
    const junit = await fsp.readFile(this.reportPaths.junit, "utf8").catch(() => null);
    let written;
    try {
      written = JSON.parse(await fsp.readFile(this.reportPaths.json, "utf8"));
    } catch {
      // No report: stopped before a verdict (exit 6), or the double itself failed.
      const verdict = code === EXIT_INTERRUPTED || (this._exit && this._exit.signal) ? "interrupted" : "error";
      return new Verdict({ double: this.name, exitCode: code, verdict, why: why || `${this.name} exited ${code} without a verdict`, brokenRules: [], findings: [], report, junit, outcome: {} });
    }
    const outcome = written.outcome || {};
    return new Verdict({
      double: this.name,
      exitCode: code,
      verdict: written.verdict,
      why: outcome.not_applicable || why || null,
      brokenRules: (written.broken_rules || []).map((rule) => rule.id),
      findings: outcome.findings || [],
      report,
      junit,
      outcome,
      strict: this._strict,
    });
  }

  _simulatedVerdict(findings) {
    const code = this._exit ? this._exit.code ?? -1 : -1;
    const rules = [...new Set(findings.map((finding) => finding.rule))].sort();
    let report = this.output();
    if (findings.length) {
      const said = findings.map((f) => `  rule ${f.rule}: ${f.summary}${f.detail ? `\n    ${f.detail}` : ""}`).join("\n");
      report = `${this.name} (no scenario): the peer broke ${rules.join(", ")}\n${said}\n${report}`;
    }
    const verdict = findings.length ? "failed" : code === 0 || (this._exit && this._exit.signal === "SIGTERM") ? "passed" : "error";
    return new Verdict({ double: this.name, exitCode: code, verdict, why: null, brokenRules: rules, findings, report, junit: null, outcome: {} });
  }
}

function scenarioName(scenario, side) {
  if (scenario == null) return null;
  // `device/negotiate.yaml` and `negotiate.yaml` name the same embedded scenario.
  const prefix = `${side}/`;
  return scenario.startsWith(prefix) && !fs.existsSync(scenario) ? scenario.slice(prefix.length) : scenario;
}

async function start(name, options, specific) {
  const workdir = options.workdir ?? (await fsp.mkdtemp(path.join(os.tmpdir(), `lembas-${name}-`)));
  await fsp.mkdir(workdir, { recursive: true });
  const scenario = scenarioName(options.scenario, name === "fake-instance" ? "instance" : "device");
  const hooks = options.hooks ? await writeHooks(options.hooks, path.join(workdir, "hooks.yaml")) : null;
  const args = [
    ...specific.args,
    "--spec", options.spec ?? DEFAULT_SPEC,
    "--control",
    "--journal", path.join(workdir, "journal.jsonl"),
  ];
  if (scenario) args.push("--scenario", scenario, "--report", `json:${path.join(workdir, "report.json")}`, "--report", `junit:${path.join(workdir, "report.xml")}`);
  if (hooks) args.push("--hooks", hooks.file);
  if (options.arranged && options.arranged.length) args.push("--arranged", options.arranged.join(","));
  if (options.strict) args.push("--strict");
  if (options.exec) args.push("--exec", options.exec);
  args.push(...(options.args ?? []));
  // The control token goes in the environment, where `ps` does not show it.
  const controlToken = crypto.randomBytes(16).toString("hex");
  let file;
  try {
    file = binaryPath(name);
  } catch (e) {
    if (hooks && hooks.server) hooks.server.close();
    throw e;
  }
  // In the test's own working directory: relative scenario and hooks paths mean what they say.
  const child = spawn(file, args, {
    env: { ...process.env, ...options.env, NO_COLOR: "1", LEMBAS_CONTROL_TOKEN: controlToken },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const double = new Double(name, child, {
    strict: Boolean(options.strict),
    url: specific.url ?? null,
    token: options.token ?? DEFAULT_TOKEN,
    protocol: options.protocol ?? DEFAULT_PROTOCOL,
    spec: options.spec ?? DEFAULT_SPEC,
    scenario,
    workdir,
    root: specific.root ?? null,
    controlToken,
    hookServer: hooks && hooks.server,
  });
  return double._ready(options.readyTimeoutMs ?? 30_000);
}

/**
 * Starts fake-instance (playing LLeMbas, the web server) for the CLI under test; resolves once
 * it listens. Point the CLI at `url` with `token`, or give `exec` (the CLI's command, with
 * `{url}`, `{token}`, `{root}`, `{tmp}`) to have the double start and end it.
 */
function startFakeInstance(options = {}) {
  const protocol = options.protocol ?? DEFAULT_PROTOCOL;
  return start("fake-instance", options, {
    args: ["--protocol", String(protocol), "--token", options.token ?? DEFAULT_TOKEN],
  });
}

/**
 * Starts fake-device (playing the LLeMbas CLI) against the web server under test at `instance`,
 * or one it starts with `exec` (with `{port}`); resolves once its control API is up.
 */
async function startFakeDevice(options = {}) {
  if (!options.instance && !options.exec) {
    throw new Error("startFakeDevice needs the server under test: give `instance` (its URL) or `exec` (its command, with {port})");
  }
  const workdir = options.workdir ?? (await fsp.mkdtemp(path.join(os.tmpdir(), "lembas-fake-device-")));
  const root = options.root ?? path.join(workdir, "root");
  await fsp.mkdir(root, { recursive: true });
  const args = [
    "--protocol", String(options.protocol ?? DEFAULT_PROTOCOL),
    "--token", options.token ?? DEFAULT_TOKEN,
    "--root", root,
    "--state-dir", path.join(workdir, "state"),
  ];
  if (options.instance) args.push("--instance", options.instance);
  return start("fake-device", { ...options, workdir }, { args, url: options.instance ?? null, root });
}

/**
 * The recipe's one-call form: runs `scenario` with fake-instance starting the CLI (`exec`), and
 * resolves with the verdict, whatever it is.
 */
async function runScenario(scenario, options) {
  const instance = await startFakeInstance({ ...options, scenario });
  return instance.verdict({ timeoutMs: options.timeoutMs });
}

exports.DEFAULT_TOKEN = DEFAULT_TOKEN;
exports.ControlError = ControlError;
exports.Double = Double;
exports.Verdict = Verdict;
exports.binaryPath = binaryPath;
exports.platformKey = platformKey;
exports.runScenario = runScenario;
exports.startFakeDevice = startFakeDevice;
exports.startFakeInstance = startFakeInstance;
