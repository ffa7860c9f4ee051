// A LLeMbas CLI's tests through lembas-doubles, as a TypeScript project writes them. The CLI
// under test is a stand-in: fake-device, which plays a correct LLeMbas CLI (a real project
// starts its own CLI where this starts fake-device).
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, test } from "vitest";
import { binaryPath, runScenario, startFakeDevice, startFakeInstance, type Double } from "lembas-doubles";

const started: { kill(): unknown }[] = [];
afterEach(async () => {
  for (const thing of started.splice(0)) await thing.kill();
});

/** The CLI under test, pointed at the instance with its URL and device token. */
function startCli(instance: Double, ...extra: string[]): ChildProcess {
  const cli = spawn(binaryPath("fake-device"), ["--instance", instance.url!, "--token", instance.token, ...extra], {
    stdio: "ignore",
  });
  started.push(cli);
  return cli;
}

describe.each([1, 2] as const)("protocol %i", (protocol) => {
  test("a well-behaved CLI passes negotiate", async () => {
    const instance = await startFakeInstance({ scenario: "negotiate.yaml", protocol });
    startCli(instance);
    // The control API while the scenario runs: the CLI said hello with the cell's protocol.
    const hello = await instance.waitFor("_lembas/hello", { direction: "in" });
    expect(hello.msg.params.protocol).toBe(protocol);
    const verdict = await instance.verdict();
    expect(verdict.verdict, verdict.report).toBe("passed");
    expect(verdict.junit).toContain("<testsuite");
  });

  test("fake-instance can start the CLI itself (exec)", async () => {
    const verdict = await runScenario("negotiate.yaml", {
      protocol,
      exec: `exec '${binaryPath("fake-device")}' --instance {url} --token {token} --root {root} --state-dir {tmp}/state`,
    });
    expect(verdict.verdict, verdict.report).toBe("passed");
  });
});

test("a CLI that breaks a rule fails, naming it, with the report", async () => {
  const instance = await startFakeInstance({ scenario: "negotiate.yaml", protocol: 2 });
  startCli(instance, "--misbehave", "device.hello.protocol");
  const verdict = await instance.verdict();
  expect(verdict.verdict).toBe("failed");
  expect(verdict.brokenRules).toContain("device.hello.protocol");
  expect(verdict.report).toMatch(/FAILED: the peer broke device\.hello\.protocol/);
  expect(() => verdict.assertPassed()).toThrow(/check hello\.protocol/);
});

test("not applicable is no failure unless strict, the one switch", async () => {
  // A CLI that lists no `files`: files-search does not apply to it.
  const exec = `exec '${binaryPath("fake-device")}' --instance {url} --token {token} --root {root} --state-dir {tmp}/state --capabilities turns`;
  const lenient = await runScenario("files-search.yaml", { protocol: 2, exec });
  expect(lenient.verdict, lenient.report).toBe("not_applicable");
  expect(() => lenient.assertPassed()).not.toThrow();
  expect(() => lenient.assertPassed({ strict: true })).toThrow(/not_applicable/);
  const strict = await runScenario("files-search.yaml", { protocol: 2, exec, strict: true });
  expect(strict.exitCode).toBe(1);
  expect(() => strict.assertPassed()).toThrow(/not_applicable/);
});

test("a simulated instance's web UI is driven from the test", async () => {
  const instance = await startFakeInstance({ protocol: 2 });
  started.push({ kill: () => instance.stop() });
  startCli(instance, "--root", process.cwd());
  const chat = await instance.act({ open_chat: {} }, { withinMs: 20_000 });
  await instance.act({ send: { chat: chat.sessionId, text: "hello there" } });
  const update = await instance.waitFor("session/update", {
    direction: "in",
    where: (entry) => JSON.stringify(entry.msg).includes("hello"),
    timeoutMs: 20_000,
  });
  expect(update.msg.params.sessionId).toBe(chat.sessionId);
  const verdict = await instance.stop();
  expect(verdict.verdict, verdict.report).toBe("passed");
});

test("fake-device checks a web server (here fake-instance standing in for one)", async () => {
  const server = await startFakeInstance({ protocol: 1 });
  started.push({ kill: () => server.stop() });
  const device = await startFakeDevice({ instance: server.url!, scenario: "negotiate.yaml", protocol: 1 });
  const verdict = await device.verdict();
  expect(verdict.verdict, verdict.report).toBe("passed");
});

test("npm linked the commands", () => {
  for (const name of ["fake-instance", "fake-device", "harness"]) {
    const said = execFileSync(`node_modules/.bin/${name}`, ["--version"], { encoding: "utf8" });
    expect(said.split(" ")[0]).toBe(name);
    expect(said).toContain("harness spec 1.0.0, 1.1.0");
  }
});

test("a platform without prebuilt binaries gets a clear error", () => {
  // This machine, pretending to be one no platform package was built for.
  const probe = `Object.defineProperty(process, "arch", { value: "s390x" });
    try { require("lembas-doubles").binaryPath("fake-instance"); } catch (e) { console.log(e.message); }`;
  const said = spawnSync(process.execPath, ["-e", probe], {
    encoding: "utf8",
    env: { ...process.env, LEMBAS_FAKE_INSTANCE: "" },
  });
  expect(said.stdout).toMatch(/no prebuilt binaries for this platform \(linux-s390x\); this version has them for: linux-x64\./);
  expect(said.stdout).toMatch(/LEMBAS_FAKE_INSTANCE/);
});
