// The instance's model, over its OpenAI-compatible `/v1` (spec: The HTTP API the CLI uses):
// the first chat model `/v1/models` serves, asked with streamed chat completions.

export interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  tool_call_id?: string;
  tool_calls?: ToolCall[];
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface Reply {
  text: string;
  toolCalls: ToolCall[];
}

/** Hears a piece of the model's answer: its text, or its reasoning (`thought`). */
export type Heard = (text: string, thought: boolean) => Promise<void>;

export class ModelClient {
  private chosen?: Promise<string>;

  constructor(private readonly url: string, private readonly token: string) {}

  private headers(): Record<string, string> {
    return { Authorization: `Bearer ${this.token}`, "content-type": "application/json" };
  }

  /** The served id of the first chat model (an entry with no `kind` is a chat model). */
  model(): Promise<string> {
    this.chosen ??= (async () => {
      const response = await fetch(`${this.url}/v1/models`, { headers: this.headers() });
      if (!response.ok) throw new Error(`/v1/models answered ${response.status}`);
      const body = (await response.json()) as { data?: { id: string; kind?: string }[] };
      const chat = (body.data ?? []).find((m) => m.kind === undefined || m.kind === "chat");
      if (!chat) throw new Error("the instance serves no chat model");
      return chat.id;
    })();
    this.chosen.catch(() => (this.chosen = undefined));
    return this.chosen;
  }

  /** Asks the model (`model`, else the first chat model) once, streamed; `onText` hears each piece of text (or of its reasoning,
   * `thought` true) as it comes. */
  async ask(model: string | undefined, messages: Message[], signal: AbortSignal, onText: Heard): Promise<Reply> {
    const response = await fetch(`${this.url}/v1/chat/completions`, {
      method: "POST",
      headers: this.headers(),
      body: JSON.stringify({ model: model ?? (await this.model()), messages, stream: true }),
      signal,
    });
    if (!response.ok || !response.body) throw new Error(`the model answered ${response.status}`);
    const reply: Reply = { text: "", toolCalls: [] };
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return reply;
        await this.take(JSON.parse(data), reply, onText);
      }
    }
    return reply;
  }

  private async take(event: any, reply: Reply, onText: Heard) {
    const delta = event?.choices?.[0]?.delta ?? {};
    if (typeof delta.reasoning_content === "string" && delta.reasoning_content) {
      await onText(delta.reasoning_content, true);
    }
    if (typeof delta.content === "string" && delta.content) {
      reply.text += delta.content;
      await onText(delta.content, false);
    }
    for (const fragment of delta.tool_calls ?? []) {
      // A fragment without an index continues the last call (spec 1.1.0's change note).
      const index = typeof fragment.index === "number" ? fragment.index : Math.max(reply.toolCalls.length - 1, 0);
      const call = (reply.toolCalls[index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
      if (fragment.id) call.id = fragment.id;
      if (fragment.function?.name) call.function.name += fragment.function.name;
      if (fragment.function?.arguments) call.function.arguments += fragment.function.arguments;
    }
  }
}
