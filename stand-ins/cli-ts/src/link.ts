// One link to the instance: the WebSocket (the device token in the Authorization header), the
// hello, and the SDK's agent app serving the instance's requests until the link ends.

import os from "node:os";
import { WebSocket } from "ws";
import { agent, methods, RequestError } from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import type { Sessions, Client } from "./sessions.js";

/** What this device implements beyond plain ACP, and nothing more (spec: Versions and discovery). */
export const CAPABILITIES = ["status", "delete", "title", "turns", "steer"];

/** The LLeMbas CLI version that first implemented each harness spec (the spec's header). */
function version(spec: string): string {
  return spec === "1.0.0" ? "1.0.0" : "1.3.0";
}

export interface LinkSettings {
  url: string;
  token: string;
  protocol: number;
  spec: string;
  roots: string[];
  sessions: Sessions;
}

export interface LinkEnd {
  /** The close code the instance sent, if any. */
  code?: number;
  /** The upgrade was refused with 401. */
  refused: boolean;
  /** The link came up. */
  opened: boolean;
}

const passThrough = (params: unknown) => params as Record<string, unknown>;

function limits(roots: string[]) {
  return { roots, max_mode: "edit", require_trust: false };
}

/** Serves one link until it ends. */
export async function serveLink(settings: LinkSettings): Promise<LinkEnd> {
  const end: LinkEnd = { refused: false, opened: false };
  // The SDK's WebSocket stream takes a constructor: this one notes how the socket ended.
  class Watched extends WebSocket {
    constructor(address: string, protocols?: string | string[], options?: object) {
      super(address, protocols, options);
      this.on("open", () => (end.opened = true));
      this.on("close", (code: number) => (end.code = code));
      this.on("error", (error: Error) => {
        if (/Unexpected server response: 401/.test(error.message)) end.refused = true;
      });
    }
  }
  const linkUrl = settings.url.replace(/^http/, "ws") + "/api/devices/link";
  const stream = createWebSocketStream(linkUrl, {
    WebSocket: Watched as unknown as typeof globalThis.WebSocket,
    headers: { Authorization: `Bearer ${settings.token}` },
  });

  const client: Client = { lembas: false, protocol: 1, speaks2: settings.protocol >= 2, notify: async () => {} };
  const app = agent({ name: "stand-in-cli" })
    .onRequest(methods.agent.initialize, async ({ params }) => {
      const said = (params.clientCapabilities?._meta as Record<string, unknown> | undefined)?.lembas;
      client.lembas = said === true || (typeof said === "object" && said !== null);
      const asked = typeof said === "object" && said !== null ? Number((said as { protocol?: unknown }).protocol ?? 1) : 1;
      client.protocol = Math.min(asked, settings.protocol);
      return {
        protocolVersion: 1,
        agentCapabilities: {
          loadSession: false,
          promptCapabilities: { image: false, audio: false, embeddedContext: false },
          mcpCapabilities: { http: false, sse: false },
        },
        authMethods: [],
        agentInfo: { name: "stand-in CLI", version: version(settings.spec) },
        _meta: {
          lembas: {
            protocol: settings.protocol,
            harness_spec: settings.spec,
            limits: limits(settings.roots),
            capabilities: CAPABILITIES,
          },
        },
      };
    })
    .onRequest(methods.agent.session.new, async ({ params }) => {
      return settings.sessions.open(params.cwd, (params._meta ?? {}) as Record<string, unknown>, client);
    })
    .onRequest(methods.agent.session.prompt, async ({ params }) => {
      return settings.sessions.prompt(params.sessionId, params.prompt, (params._meta ?? {}) as Record<string, unknown>, client);
    })
    .onRequest(methods.agent.session.setMode, async ({ params }) => {
      settings.sessions.setMode(params.sessionId, params.modeId, client);
      return {};
    })
    .onNotification(methods.agent.session.cancel, async ({ params }) => {
      settings.sessions.cancel(params.sessionId);
    })
    .onRequest("_lembas/session/status", passThrough, async ({ params }) =>
      settings.sessions.status(String(params.sessionId ?? "")))
    .onRequest("_lembas/session/delete", passThrough, async ({ params }) =>
      settings.sessions.remove(String(params.sessionId ?? "")))
    .onRequest("_lembas/session/title", passThrough, async ({ params }) =>
      settings.sessions.retitle(String(params.sessionId ?? ""), params.title, client))
    .onRequest("_lembas/steer", passThrough, async ({ params }) =>
      settings.sessions.steer(String(params.sessionId ?? ""), params.text, params.messageId));

  const connection = app.connect(stream);
  client.notify = async (method, params) => {
    await connection.client.notify(method, params).catch(() => {});
  };
  // The hello comes first, before initialize (spec: `_lembas/hello`).
  await client.notify("_lembas/hello", {
    protocol: settings.protocol,
    version: version(settings.spec),
    harness_spec: settings.spec,
    device: { host: os.hostname(), platform: process.platform },
    limits: limits(settings.roots),
  });
  settings.sessions.linked(client);
  await connection.closed.catch(() => {});
  settings.sessions.unlinked(client);
  return end;
}

export { RequestError };
