/**
 * Types of `lembas-doubles`: start the LLeMbas link doubles from a vitest (or jest) test, drive
 * them over their control API (docs/control-api.yaml), and take their verdict.
 */

/** The device token fake-instance accepts and fake-device says by default. */
export declare const DEFAULT_TOKEN: "lembas-test-token";

/** A hook as a function: gets the action's fields, returns its result (which a scenario may capture). */
export type HookFunction = (fields: any) => unknown | Promise<unknown>;

/** A hook as the hooks file writes it. */
export type HookSpec =
  | { run: string; timeout?: string; [key: string]: unknown }
  | { http: { url: string; method?: string; json?: unknown; headers?: Record<string, string> }; [key: string]: unknown }
  | { stdin: string; reply?: string; [key: string]: unknown };

/** A hooks file's path, or hooks by action name (`open_chat`, `share_session`, ...). */
export type Hooks = string | Record<string, HookFunction | HookSpec>;

export interface CommonOptions {
  /** An embedded scenario (`negotiate.yaml`, `instance/negotiate.yaml`) or a file. None: a simulated double. */
  scenario?: string;
  /** The link protocol of the cell (default 2). */
  protocol?: 1 | 2;
  /** The harness spec of the cell (default 1.1.0). */
  spec?: "1.0.0" | "1.1.0";
  /** The device token (default `lembas-test-token`). */
  token?: string;
  /** The set-up a scenario's `peer:` asks for, done by your code. */
  hooks?: Hooks;
  /** The system under test's command, run by `sh -c` once the double is up and ended after. */
  exec?: string;
  /** Set-up your test arranges itself (`--arranged`). */
  arranged?: string[];
  /** A scenario that does not apply to the peer fails instead of being not applicable. */
  strict?: boolean;
  /** More command-line arguments for the double. */
  args?: string[];
  /** Where its reports, journal and state go (default: a fresh temporary directory). */
  workdir?: string;
  /** More environment for the double (and what it starts with `exec`). */
  env?: Record<string, string>;
  /** How long it may take to be up (default 30 000 ms). */
  readyTimeoutMs?: number;
}

export interface FakeInstanceOptions extends CommonOptions {
  /** The CLI under test, with `{url}`, `{ws_url}`, `{port}`, `{token}`, `{root}`, `{tmp}`, `{protocol}`, `{spec}`. */
  exec?: string;
}

export interface FakeDeviceOptions extends CommonOptions {
  /** The web server under test's base URL (or give `exec`, its command with `{port}`). */
  instance?: string;
  /** The directory the device offers as its remote root (default: a fresh one). */
  root?: string;
}

export interface JournalEntry {
  seq: number;
  t_ms: number;
  link: number;
  dir: "in" | "out" | "event";
  msg: any;
}

export interface JournalPage {
  entries: JournalEntry[];
  last: number;
}

export interface Finding {
  rule: string;
  summary: string;
  detail?: string;
  link?: number;
}

export interface State {
  double: "fake-instance" | "fake-device";
  cell: { protocol: number; spec: string };
  scenario: { name: string | null; step: { index: string; title: string; line: number } | null; steps_ended: number };
  links: { link: number; open: boolean; close_code: number | null }[];
  findings: Finding[];
  signals: string[];
  /** The double's own state (chats, sessions, pending deletes, ...). */
  peer: Record<string, any>;
}

export declare class Verdict {
  readonly double: "fake-instance" | "fake-device";
  /** The double's exit code (0 passed or not applicable, 1 failed, 2 scenario error, 6 interrupted). */
  readonly exitCode: number;
  /** `passed`, `not_applicable`, `failed`, `scenario_error`; without a report `interrupted` or `error`. */
  readonly verdict: "passed" | "not_applicable" | "failed" | "scenario_error" | "interrupted" | "error";
  /** Why the scenario did not apply, or what went wrong. */
  readonly why: string | null;
  readonly brokenRules: string[];
  readonly findings: Finding[];
  /** The human report (steps, the rule broken, the diff, the last messages), then stderr. */
  readonly report: string;
  /** The double's JUnit XML (a run with a scenario). */
  readonly junit: string | null;
  readonly outcome: Record<string, any>;
  readonly passed: boolean;
  /** Whether the run was strict: then "not applicable" fails `assertPassed` as a failure does. */
  readonly strict?: boolean;
  /**
   * Throws an Error carrying the report unless the peer passed; "not applicable" is no failure
   * unless `strict` (this call's, else the run's).
   */
  assertPassed(options?: { strict?: boolean; allowNotApplicable?: boolean }): void;
  /** Throws unless the peer was caught breaking `rule`. */
  assertFailedOn(rule: string): void;
}

export declare class ControlError extends Error {
  readonly status: number;
  readonly error: string;
  readonly body: unknown;
  /** The action needs what the peer never claimed. */
  readonly notApplicable: boolean;
}

/** One run of a double. */
export declare class Double {
  readonly name: "fake-instance" | "fake-device";
  /** fake-instance: its URL, for the CLI under test. fake-device: the server it dials (null when `exec` chose it). */
  readonly url: string | null;
  /** The device token. */
  readonly token: string;
  readonly protocol: number;
  readonly spec: string;
  readonly scenario: string | null;
  readonly workdir: string;
  /** fake-device: its remote root. */
  readonly root: string | null;
  readonly controlUrl: string;
  readonly journalPath: string;
  readonly reportPaths: { json: string; junit: string };
  readonly running: boolean;
  /** Resolves when the process has ended. */
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** What the double printed so far. */
  output(): string;
  state(): Promise<State>;
  journal(options?: { after?: number; waitMs?: number; limit?: number }): Promise<JournalPage>;
  waitFor(
    method?: string | null,
    options?: { where?: (entry: JournalEntry) => boolean; direction?: "in" | "out" | "event"; after?: number; timeoutMs?: number },
  ): Promise<JournalEntry>;
  /** One action of the double's own side (`{ open_chat: {} }`); resolves with its result. */
  act(action: Record<string, unknown>, options?: { withinMs?: number }): Promise<any>;
  inject(message: { text?: string; message?: unknown; link?: number }): Promise<number>;
  signal(name: string): Promise<void>;
  /** Waits for the scenario's verdict (default 120 000 ms); a simulated double is stopped and judged on its findings. */
  verdict(options?: { timeoutMs?: number }): Promise<Verdict>;
  /** Ends the run now and gives its verdict. */
  stop(options?: { graceMs?: number }): Promise<Verdict>;
}

export declare function startFakeInstance(options?: FakeInstanceOptions): Promise<Double>;
export declare function startFakeDevice(options: FakeDeviceOptions): Promise<Double>;
/** Runs `scenario` with fake-instance starting the CLI (`exec`); resolves with the verdict. */
export declare function runScenario(scenario: string, options: FakeInstanceOptions & { exec: string; timeoutMs?: number }): Promise<Verdict>;
/** The path of a binary: LEMBAS_FAKE_INSTANCE (...) when set, else this platform's package's. */
export declare function binaryPath(name: "fake-instance" | "fake-device" | "harness"): string;
/** This machine's platform key (`linux-x64`, `linux-x64-musl`, `darwin-arm64`, ...). */
export declare function platformKey(): string;
