/**
 * A vitest helper for a LLeMbas CLI's tests: start fake-instance with a scenario, let it spawn
 * the CLI under test with the instance's URL and a device token (`--exec`), and await the
 * verdict. fake-instance ends the CLI, with every process it started, when the run ends.
 *
 *   import { expect, test } from "vitest";
 *   import { runScenario } from "./lembas";
 *
 *   test("the CLI says hello as the spec says", async () => {
 *     const verdict = await runScenario("negotiate.yaml", {
 *       exec: "node dist/cli.js serve --url {url} --token {token} --root {root}",
 *       protocol: 1,
 *     });
 *     // Not applicable (the scenario needs what the CLI never claimed) is no failure.
 *     expect(["passed", "not_applicable"], verdict.report).toContain(verdict.verdict);
 *   });
 *
 * Needs `fake-instance` on PATH, or named by LEMBAS_FAKE_INSTANCE.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Options {
  /** The CLI under test, run by `sh -c`: {url}, {ws_url}, {port}, {token}, {root}, {tmp}, {protocol}, {spec}. */
  exec: string;
  /** The link protocol of the cell (1 or 2; default 2). */
  protocol?: 1 | 2;
  /** The harness spec (default 1.1.0). */
  spec?: "1.0.0" | "1.1.0";
  /** A hooks file for the set-up only the CLI can do (a person at its terminal, ...). */
  hooks?: string;
  /** More fake-instance arguments. */
  args?: string[];
  /** How long the whole run may take, in ms (default 120 000). */
  timeoutMs?: number;
}

export interface Verdict {
  /** fake-instance's exit code: 0 passed or not applicable, 1 a rule broken, 2 a scenario error. */
  exitCode: number;
  /** passed, not_applicable, failed or scenario_error. */
  verdict: string;
  /** The rules the CLI broke. */
  brokenRules: string[];
  /** Why the scenario did not apply, when it did not. */
  why?: string;
  /** The human report (steps, the rule broken, the diff, the CLI's output). */
  report: string;
}

/** Runs one scenario against the CLI; resolves with the verdict, whatever it is. */
export async function runScenario(scenario: string, options: Options): Promise<Verdict> {
  const dir = await mkdtemp(join(tmpdir(), "lembas-"));
  const json = join(dir, "report.json");
  const binary = process.env.LEMBAS_FAKE_INSTANCE ?? "fake-instance";
  const args = [
    "--scenario", scenario,
    "--protocol", String(options.protocol ?? 2),
    "--spec", options.spec ?? "1.1.0",
    "--exec", options.exec,
    "--report", `json:${json}`,
    ...(options.hooks ? ["--hooks", options.hooks] : []),
    ...(options.args ?? []),
  ];
  const child = spawn(binary, args, { env: { ...process.env, NO_COLOR: "1" } });
  let report = "";
  child.stdout.on("data", (chunk) => (report += chunk));
  child.stderr.on("data", (chunk) => (report += chunk));
  const exitCode = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      // SIGTERM: fake-instance ends the CLI's process group before it exits.
      child.kill("SIGTERM");
      reject(new Error(`fake-instance did not finish within ${options.timeoutMs ?? 120_000} ms\n${report}`));
    }, options.timeoutMs ?? 120_000);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve(code ?? -1);
    });
  });
  let written: any = {};
  try {
    written = JSON.parse(await readFile(json, "utf8"));
  } catch {
    return { exitCode, verdict: "error", brokenRules: [], report };
  }
  return {
    exitCode,
    verdict: written.verdict,
    brokenRules: (written.broken_rules ?? []).map((rule: { id: string }) => rule.id),
    why: written.outcome?.not_applicable,
    report,
  };
}
