"""Drives `fake-device serve --stdio` with the official ACP Python SDK (agent-client-protocol):
initialize, session/new, a prompt with streamed updates and a permission request, and a cancel.
The SDK parses every message it gets into the schema's models, so a message that does not fit
the official schema fails here. Usage: drive.py FAKE_DEVICE SCRIPTS CWD; prints `ok` at the end."""

import asyncio
import sys

import acp
from acp import schema


class Editor(acp.Client):
    def __init__(self):
        self.updates = []
        self.permissions = []
        self.first_chunk = asyncio.Event()
        # The SDK logs and swallows what a notification handler raises: kept here, checked at
        # the end.
        self.unexpected = []

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.permissions.append((tool_call, options))
        kinds = {o.kind: o.option_id for o in options}
        assert "allow_once" in kinds and "reject_once" in kinds, kinds
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=kinds["allow_once"])
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)
        if isinstance(update, schema.AgentMessageChunk):
            self.first_chunk.set()

    async def write_text_file(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("fs/write_text_file")

    async def read_text_file(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("fs/read_text_file")

    async def create_terminal(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("terminal/create")

    async def terminal_output(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("terminal/output")

    async def release_terminal(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("terminal/kill")

    async def ext_method(self, method, params):
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method, params):
        self.unexpected.append(method)


def text_of(updates):
    return "".join(
        u.content.text
        for u in updates
        if isinstance(u, schema.AgentMessageChunk) and isinstance(u.content, schema.TextContentBlock)
    )


async def main(fake_device, scripts, cwd):
    editor = Editor()
    async with acp.spawn_agent_process(
        editor, fake_device, "serve", "--stdio", "--scripts", scripts, "--approval-timeout", "10s"
    ) as (conn, _process):
        # Even an editor that says it is LLeMbas gets plain ACP on stdio.
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=schema.ClientCapabilities(field_meta={"lembas": {"protocol": 2}}),
            ),
            10,
        )
        assert init.protocol_version == 1, init
        assert init.agent_info.name == "LLeMbas CLI", init
        assert init.field_meta["lembas"]["limits"] is None, init.field_meta

        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), 10)
        sid = session.session_id

        answer = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[acp.text_block("deploy the site")]), 20
        )
        assert answer.stop_reason == "end_turn", answer
        assert text_of(editor.updates) == "Deploying now. Deployed.", text_of(editor.updates)
        assert any(isinstance(u, schema.AgentThoughtChunk) for u in editor.updates)
        assert any(isinstance(u, schema.ToolCallStart) for u in editor.updates)
        assert any(isinstance(u, schema.AvailableCommandsUpdate) for u in editor.updates)
        assert len(editor.permissions) == 1, editor.permissions
        assert "make deploy" in (editor.permissions[0][0].title or ""), editor.permissions

        editor.updates.clear()
        editor.first_chunk.clear()
        running = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[acp.text_block("take your time")])
        )
        await asyncio.wait_for(editor.first_chunk.wait(), 10)
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(running, 10)
        assert cancelled.stop_reason == "cancelled", cancelled
        assert "Done" not in text_of(editor.updates), text_of(editor.updates)
    assert not editor.unexpected, f"an editor got extension notifications: {editor.unexpected}"
    print("ok")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
