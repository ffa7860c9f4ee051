// The device's sessions, in memory: each with its turns (queued behind the running one, and
// deduplicated by the client's turn id), its steer messages and its history for the model.
// Nothing is kept across a restart: this device does not list `sessions`.

import fs from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { RequestError } from "@agentclientprotocol/sdk";
import type { ModelClient, Message } from "./model.js";

/** Where a session's updates and events go: the link it is on now. */
export interface Client {
  /** The client said `_meta.lembas`: it gets `_lembas/event`. */
  lembas: boolean;
  /** The protocol the client speaks on this link. */
  protocol: number;
  /** The instance's discovery lists protocol 2 (its served ids are the device's refs). */
  speaks2: boolean;
  notify: (method: string, params: unknown) => Promise<void>;
}

interface Answer {
  stopReason: "end_turn" | "cancelled";
  _meta: { lembas: Record<string, unknown> };
}

interface Turn {
  id: string;
  state: "queued" | "running" | "done";
  answer: Promise<Answer>;
}

interface Steer {
  text: string;
  id?: string;
}

interface Session {
  id: string;
  cwd: string;
  mode: string;
  /** The instance's served model id the session runs on (`lembas_model`), if one was named. */
  model?: string;
  title: string;
  history: Message[];
  turns: Map<string, Turn>;
  /** The end of the last turn asked for: the next one runs after it. */
  tail: Promise<unknown>;
  running?: { turn: Turn; abort: AbortController; steers: Steer[] };
  lastTurnId?: string;
}

const MODES = ["plan", "manual", "edit"];
const MAX_MODE = "edit";
/** Turn ids kept per session (spec: `session/prompt`, turn ids). */
const TURNS_KEPT = 200;
const MAX_TITLE = 200;
const MODEL_ROUNDS = 4;

/** The login's name for the instance: its models' refs may be written behind it. */
const LOGIN = "lembas";

/**
 * The served model id a session opens on: `lembas_model` is the instance's name for it;
 * `model` is a ref of the device's, which for an instance model is its served id (or the old
 * form, behind the login).
 */
function sessionModel(meta: Record<string, unknown>): string | undefined {
  if (typeof meta.lembas_model === "string") return meta.lembas_model;
  if (typeof meta.model !== "string") return undefined;
  return meta.model.startsWith(`${LOGIN}/`) ? meta.model.slice(LOGIN.length + 1) : meta.model;
}

/** A tool call's arguments as the model wrote them: JSON when they are, else the text. */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const fresh = (prefix: string) => `${prefix}_${randomBytes(8).toString("hex")}`;

function lowered(mode: string | undefined): string {
  const asked = MODES.indexOf(mode ?? MAX_MODE);
  return MODES[Math.min(asked < 0 ? MODES.length - 1 : asked, MODES.indexOf(MAX_MODE))];
}

function realpath(dir: string): string | undefined {
  try {
    return fs.realpathSync(dir);
  } catch {
    return undefined;
  }
}

export class Sessions {
  private readonly sessions = new Map<string, Session>();
  private current?: Client;

  constructor(private readonly roots: string[], private readonly model: ModelClient) {}

  linked(client: Client) {
    this.current = client;
  }

  unlinked(client: Client) {
    if (this.current === client) this.current = undefined;
  }

  private async update(sessionId: string, update: Record<string, unknown>) {
    await this.current?.notify("session/update", { sessionId, update });
  }

  private async event(sessionId: string, event: Record<string, unknown>) {
    if (this.current?.lembas) await this.current.notify("_lembas/event", { sessionId, event });
  }

  private find(sessionId: string): Session {
    const session = this.sessions.get(sessionId);
    if (!session) throw RequestError.sessionNotFound(sessionId);
    return session;
  }

  /** `session/new`: a directory inside the roots (every such directory is trusted here). */
  async open(cwd: string, meta: Record<string, unknown>, client: Client) {
    const mode = typeof meta.mode === "string" ? meta.mode : undefined;
    const real = path.isAbsolute(cwd) ? realpath(cwd) : undefined;
    if (!real || !fs.statSync(real).isDirectory()) {
      throw RequestError.invalidParams({ cwd }, `${cwd} is not a directory on this device`);
    }
    const inside = this.roots
      .map(realpath)
      .some((root) => root !== undefined && (real === root || real.startsWith(root + path.sep)));
    if (!inside) {
      throw RequestError.invalidParams({ cwd }, `${cwd} is outside this device's remote roots`);
    }
    this.current = client;
    const session: Session = {
      id: fresh("ses"),
      cwd: real,
      mode: lowered(mode),
      model: sessionModel(meta),
      title: "",
      history: [],
      turns: new Map(),
      tail: Promise.resolve(),
    };
    this.sessions.set(session.id, session);
    let served: string | null = session.model ?? null;
    try {
      served ??= await this.model.model();
    } catch {
      served = null;
    }
    // The device's ref for an instance model (spec: how the device names an instance's
    // models): its served id from an instance that speaks protocol 2, else behind the login.
    const model = served === null || client.speaks2 ? served : `${LOGIN}/${served}`;
    return {
      sessionId: session.id,
      modes: { currentModeId: session.mode, availableModes: MODES.map((id) => ({ id, name: id })) },
      _meta: { lembas: { model, mode: session.mode, effort: "off" } },
    };
  }

  setMode(sessionId: string, modeId: string, client: Client) {
    const session = this.find(sessionId);
    this.current = client;
    session.mode = lowered(modeId);
    void this.event(session.id, { type: "mode", mode: session.mode });
  }

  /** `session/prompt`: a known turn id gets the original's answer; others queue and run. */
  prompt(sessionId: string, blocks: { type: string; text?: string | null; uri?: string | null }[], meta: Record<string, unknown>, client: Client): Promise<Answer> {
    const session = this.find(sessionId);
    this.current = client;
    const lembas = (meta.lembas ?? {}) as { turnId?: unknown };
    const given = typeof lembas.turnId === "string" ? lembas.turnId : undefined;
    const known = given === undefined ? undefined : session.turns.get(given);
    if (known) return known.answer;
    const parts: string[] = [];
    for (const block of blocks) {
      if (block.type === "text") parts.push(block.text ?? "");
      else if (block.type === "resource_link") parts.push(`(see ${block.uri})`);
      else throw RequestError.invalidParams({ type: block.type }, `this device takes no ${block.type} blocks`);
    }
    const text = parts.join("\n\n");
    const turn: Turn = { id: given ?? fresh("turn"), state: "queued", answer: Promise.resolve() as never };
    turn.answer = session.tail.then(() => this.run(session, turn, text));
    session.tail = turn.answer.catch(() => {});
    session.turns.set(turn.id, turn);
    while (session.turns.size > TURNS_KEPT) {
      const oldest = session.turns.keys().next().value as string;
      session.turns.delete(oldest);
    }
    return turn.answer;
  }

  private async run(session: Session, turn: Turn, text: string): Promise<Answer> {
    if (!this.sessions.has(session.id)) throw RequestError.sessionNotFound(session.id);
    turn.state = "running";
    const abort = new AbortController();
    const running = { turn, abort, steers: [] as Steer[] };
    session.running = running;
    await this.event(session.id, { type: "prompt", text, turnId: turn.id });
    await this.event(session.id, { type: "task", state: "start", turnId: turn.id });
    const messages: Message[] = [...session.history, { role: "user", content: text }];
    let said = "";
    let stopReason: Answer["stopReason"] = "end_turn";
    try {
      for (let round = 0; round < MODEL_ROUNDS; round++) {
        if (round > 0 && running.steers.length > 0) {
          const taken = running.steers.splice(0);
          for (const steer of taken) messages.push({ role: "user", content: steer.text });
          await this.event(session.id, {
            type: "steered",
            texts: taken.map((s) => s.text),
            ids: taken.flatMap((s) => (s.id ? [s.id] : [])),
          });
        }
        const reply = await this.model.ask(session.model, messages, abort.signal, async (piece, thought) => {
          if (thought) {
            await this.update(session.id, { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: piece } });
            await this.event(session.id, { type: "reasoning", text: piece });
            return;
          }
          said += piece;
          await this.update(session.id, { sessionUpdate: "agent_message_chunk", content: { type: "text", text: piece } });
          await this.event(session.id, { type: "text", text: piece });
        });
        if (reply.toolCalls.length === 0) break;
        // This device has no tools: each call the model makes is answered as unavailable.
        messages.push({ role: "assistant", content: reply.text, tool_calls: reply.toolCalls });
        for (const call of reply.toolCalls) {
          const unavailable = `the tool \`${call.function.name}\` is not available on this device`;
          await this.update(session.id, {
            sessionUpdate: "tool_call",
            toolCallId: call.id,
            title: call.function.name,
            kind: "other",
            status: "failed",
            rawInput: parsed(call.function.arguments),
            content: [{ type: "content", content: { type: "text", text: unavailable } }],
          });
          messages.push({ role: "tool", tool_call_id: call.id, content: unavailable });
        }
      }
    } catch (error) {
      if (!abort.signal.aborted) {
        this.finish(session, turn);
        await this.event(session.id, { type: "error", message: String(error) });
        await this.event(session.id, { type: "task", state: "end", turnId: turn.id });
        throw RequestError.internalError(undefined, String(error));
      }
      stopReason = "cancelled";
    }
    if (abort.signal.aborted) stopReason = "cancelled";
    session.history.push({ role: "user", content: text }, { role: "assistant", content: said });
    const unsent = running.steers.splice(0).map((s) => s.text);
    this.finish(session, turn);
    await this.event(session.id, { type: "task", state: "end", turnId: turn.id });
    const lembas: Record<string, unknown> = { turnId: turn.id };
    if (unsent.length > 0) lembas.unsent = unsent;
    return { stopReason, _meta: { lembas } };
  }

  private finish(session: Session, turn: Turn) {
    turn.state = "done";
    session.lastTurnId = turn.id;
    if (session.running?.turn === turn) session.running = undefined;
  }

  cancel(sessionId: string) {
    this.sessions.get(sessionId)?.running?.abort.abort();
  }

  steer(sessionId: string, text: unknown, messageId: unknown) {
    const session = this.find(sessionId);
    if (!session.running || typeof text !== "string") {
      throw RequestError.invalidParams({ sessionId }, "nothing runs in this session: send it as a prompt");
    }
    session.running.steers.push({ text, id: typeof messageId === "string" ? messageId : undefined });
    return { queued: session.running.steers.length };
  }

  status(sessionId: string) {
    const session = this.sessions.get(sessionId);
    if (!session) return { sessionId, exists: false, held: "none", busy: false, title: "", queued: [] };
    const queued = [...session.turns.values()].filter((t) => t.state === "queued").map((t) => t.id);
    const status: Record<string, unknown> = {
      sessionId,
      exists: true,
      held: "here",
      busy: session.running !== undefined,
      title: session.title,
      queued,
    };
    if (session.running) status.turnId = session.running.turn.id;
    if (session.lastTurnId) status.lastTurnId = session.lastTurnId;
    return status;
  }

  remove(sessionId: string) {
    const session = this.sessions.get(sessionId);
    if (!session) return { deleted: false };
    session.running?.abort.abort();
    this.sessions.delete(sessionId);
    return { deleted: true };
  }

  retitle(sessionId: string, title: unknown, client: Client) {
    const session = this.find(sessionId);
    this.current = client;
    if (typeof title !== "string") throw RequestError.invalidParams({ title }, "a title is a string");
    session.title = [...title].slice(0, MAX_TITLE).join("");
    void this.event(session.id, { type: "title", id: session.id, title: session.title });
    return { title: session.title };
  }
}
