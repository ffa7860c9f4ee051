"""One device link: the WebSocket as the SDK's message transport, the device's hello, and the
SDK's client side (``ClientSideConnection``) speaking ACP to the device over it.

The device says hello first (spec: ``_lembas/hello``); this server then closes a link it cannot
speak with 4400, or sends ``initialize`` saying the link's protocol, and learns the
capabilities the device lists from its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

from acp import ClientSideConnection, RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    RequestPermissionResponse,
)
from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from .chats import Chats

#: How long a device may take to say hello, and to answer initialize.
PATIENCE = 10.0
#: The close code for a hello whose protocol this server cannot speak (spec: Versions and discovery).
CLOSE_PROTOCOL_MISMATCH = 4400


class WebSocketTransport:
    """An aiohttp WebSocket as the SDK's ``Transport``: one text frame, one JSON-RPC message."""

    def __init__(self, socket: web.WebSocketResponse) -> None:
        self.socket = socket

    async def send(self, message: dict[str, Any]) -> None:
        await self.socket.send_str(json.dumps(message, separators=(",", ":")))

    async def receive(self) -> dict[str, Any] | None:
        while True:
            frame = await self.socket.receive()
            if frame.type == WSMsgType.TEXT:
                try:
                    message = json.loads(frame.data)
                except json.JSONDecodeError:
                    continue
                if isinstance(message, dict):
                    return message
                continue
            if frame.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.socket.close()


class Link:
    """One device's link, from its hello to its end."""

    def __init__(self, token: str, chats: Chats) -> None:
        self.token = token
        self.chats = chats
        self.hello: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.connection: ClientSideConnection | None = None
        self.capabilities: list[str] = []
        self.protocol = 1
        self.roots: list[str] = []
        #: Ended: nothing more is sent on it.
        self.closed = False

    def lists(self, capability: str) -> bool:
        return capability in self.capabilities

    async def serve(self, socket: web.WebSocketResponse, protocols: list[int]) -> None:
        """Speaks to the device until the link ends."""
        transport = WebSocketTransport(socket)
        self.connection = ClientSideConnection(LinkClient(self), transport)
        try:
            hello = await asyncio.wait_for(self.hello, PATIENCE)
        except asyncio.TimeoutError:
            await socket.close(code=1008, message=b"no hello in time")
            return
        said = hello.get("protocol") if isinstance(hello.get("protocol"), int) else 1
        if said >= 2 and 2 not in protocols:
            await socket.close(code=CLOSE_PROTOCOL_MISMATCH, message=b"this instance speaks link protocol 1 only")
            return
        self.protocol = min(said, max(protocols))
        limits = hello.get("limits") if isinstance(hello.get("limits"), dict) else {}
        self.roots = [r for r in limits.get("roots") or [] if isinstance(r, str)]
        lembas: Any = {"protocol": 2} if self.protocol >= 2 else True
        try:
            answer = await asyncio.wait_for(
                self.connection.initialize(
                    protocol_version=1,
                    client_capabilities=ClientCapabilities(field_meta={"lembas": lembas}),
                ),
                PATIENCE,
            )
        except (asyncio.TimeoutError, RequestError, ConnectionError):
            await socket.close(code=1008, message=b"initialize failed")
            return
        meta = (answer.field_meta or {}).get("lembas") or {}
        listed = meta.get("capabilities") if isinstance(meta, dict) else None
        self.capabilities = [c for c in listed or [] if isinstance(c, str)]
        await self.chats.linked(self)
        # The SDK reads the link until it ends.
        while not socket.closed:
            await asyncio.sleep(0.1)

    def ended(self) -> None:
        self.closed = True
        self.chats.unlinked(self)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A `_lembas/*` request (the SDK's extension call)."""
        if self.connection is None:
            raise ConnectionError("not linked")
        return await self.connection.ext_method(method.removeprefix("_"), params)


class LinkClient:
    """The SDK's ``Client``: what the device sends this server on one link."""

    def __init__(self, link: Link) -> None:
        self.link = link

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any):
        card = {
            "method": "session/request_permission",
            "sessionId": session_id,
            "toolCallId": tool_call.tool_call_id,
            "options": [o.option_id for o in options],
            "kinds": {o.option_id: o.kind for o in options},
            "meta": kwargs.get("lembas") or {},
        }
        answer = await self.link.chats.person.answer(card)
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer["optionId"]),
            field_meta=answer.get("_meta"),
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.link.chats.updated(session_id, update)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in ("lembas/question", "lembas/plan"):
            card = {
                "method": f"_{method}",
                "sessionId": params.get("sessionId"),
                "toolCallId": params.get("toolCallId"),
                "questions": params.get("questions"),
                "meta": ((params.get("_meta") or {}).get("lembas")) or {},
            }
            answer = await self.link.chats.person.answer(card)
            return answer if answer is not None else {"outcome": "dismissed"}
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "lembas/hello":
            if not self.link.hello.done():
                self.link.hello.set_result(params)
            return
        await self.link.chats.notified(self.link, f"_{method}", params)
