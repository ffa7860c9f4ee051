#!/usr/bin/env node
// A small LLeMbas CLI written from the link spec on the official ACP TypeScript SDK, as a team
// would write one: it reads discovery, dials the link with its device token, says hello, and
// serves the instance through the SDK's agent app (whose initialization gate is left as the SDK
// has it). It lists only the capabilities it implements. The suite runs its whole instance
// catalogue against it in CI: a conforming device built the ordinary way must pass or be not
// applicable, never fail.
//
//   stand-in-cli [serve] --url URL --token TOKEN --root DIR [--root DIR] [--spec 1.0.0|1.1.0]
//                [--state-dir DIR]
//
// It also answers to the command line the docs give a CLI under test (`lembas serve --url {url}
// --token {token} --root {root} --state-dir {tmp}/state`), so the README's command runs as
// written with it in the place of `lembas`. Without `--spec` it says the spec of the cell it was
// started for (`LEMBAS_TEST_SPEC`, which the doubles set for `--exec`).

import { Sessions } from "./sessions.js";
import { serveLink } from "./link.js";
import { ModelClient } from "./model.js";

interface Args {
  url: string;
  token: string;
  roots: string[];
  spec: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { url: "", token: "", roots: [], spec: process.env.LEMBAS_TEST_SPEC || "1.1.0" };
  if (argv[0] === "serve") argv = argv.slice(1);
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1] ?? "";
    switch (argv[i]) {
      case "--url": args.url = value; i++; break;
      case "--token": args.token = value; i++; break;
      case "--root": args.roots.push(value); i++; break;
      case "--spec": args.spec = value; i++; break;
      // Its sessions live in memory (it does not list `sessions`): a state directory is taken
      // and left empty.
      case "--state-dir": i++; break;
      default:
        process.stderr.write(`stand-in-cli: unknown argument ${argv[i]}\n`);
        process.exit(2);
    }
  }
  if (!args.url || !args.token) {
    process.stderr.write("usage: stand-in-cli --url URL --token TOKEN --root DIR [--spec S]\n");
    process.exit(2);
  }
  args.url = args.url.replace(/\/+$/, "");
  return args;
}

/** The link protocols discovery lists (`protocols`, else `protocol`), read before every dial. */
async function discoveredProtocols(url: string): Promise<number[]> {
  const response = await fetch(`${url}/.well-known/lembas.json`, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) throw new Error(`discovery answered ${response.status}`);
  const body = (await response.json()) as { protocol?: unknown; protocols?: unknown };
  if (Array.isArray(body.protocols)) return body.protocols.filter((p): p is number => typeof p === "number");
  return typeof body.protocol === "number" ? [body.protocol] : [1];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const model = new ModelClient(args.url, args.token);
  const sessions = new Sessions(args.roots, model);
  let backoff = 250;
  for (;;) {
    let protocol = 1;
    try {
      protocol = (await discoveredProtocols(args.url)).includes(2) ? 2 : 1;
    } catch (error) {
      process.stderr.write(`stand-in-cli: discovery failed: ${String(error)}\n`);
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 10_000);
      continue;
    }
    const ended = await serveLink({
      url: args.url,
      token: args.token,
      protocol,
      spec: args.spec,
      roots: args.roots,
      sessions,
    });
    if (ended.code === 4400) {
      process.stderr.write(
        "stand-in-cli: the instance and this CLI speak different link protocols — update one of them\n",
      );
      process.exit(4);
    }
    if (ended.refused) {
      process.stderr.write("stand-in-cli: the instance refused this device's token\n");
      process.exit(5);
    }
    // Any other end of the link is dialled again, with backoff and jitter; a link that came up
    // resets the backoff.
    if (ended.opened) backoff = 250;
    await sleep(backoff * (0.5 + Math.random()));
    backoff = Math.min(backoff * 2, 10_000);
  }
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => process.exit(0));
}

main().catch((error) => {
  process.stderr.write(`stand-in-cli: ${String(error)}\n`);
  process.exit(3);
});
