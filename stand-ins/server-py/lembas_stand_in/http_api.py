"""What the server answers over plain HTTP: discovery, and the API a CLI uses with its device
token (spec: The HTTP API the CLI uses): the models, an echo chat model, personalization and
the instance's description. It has no usage and no library: those answer 404, as the spec lets
an instance without them.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

#: The one chat model this server serves: an echo of the last user message.
PROVIDER = "stand-in"
MODEL = "echo"

PERSONALIZATION_FIELDS = ("personality", "personality_custom", "instructions")


def served_id(protocols: list[int]) -> str:
    """An instance that speaks protocol 2 serves every model as `<provider>/<model>`."""
    return f"{PROVIDER}/{MODEL}" if 2 in protocols else MODEL


class HttpApi:
    def __init__(self, tokens: list[str], protocols: list[int]) -> None:
        self.tokens = tokens
        self.protocols = protocols
        self.personalization: dict[str, Any] = {
            "enabled": True,
            "available": True,
            "personality": "",
            "personality_custom": "",
            "instructions": "",
        }

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/.well-known/lembas.json", self.discovery),
            web.get("/v1/models", self.models),
            web.post("/v1/chat/completions", self.chat),
            web.get("/v1/me/personalization", self.get_personalization),
            web.put("/v1/me/personalization", self.put_personalization),
            web.get("/api/v1/instance", self.instance),
        ]

    def device_token(self, request: web.Request) -> str | None:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip()
        return token if header.startswith("Bearer ") and token in self.tokens else None

    def _authorized(self, request: web.Request) -> None:
        if self.device_token(request) is None:
            raise web.HTTPUnauthorized(text=json.dumps({"detail": "a device token is needed"}), content_type="application/json")

    async def discovery(self, request: web.Request) -> web.Response:
        # `protocol` stays 1 so that a client comparing it for equality still gets in.
        return web.json_response({"protocol": 1, "protocols": self.protocols})

    async def models(self, request: web.Request) -> web.Response:
        self._authorized(request)
        entry = {"id": served_id(self.protocols), "object": "model", "owned_by": PROVIDER, "kind": "chat", "provider": PROVIDER}
        return web.json_response({"object": "list", "data": [entry]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self._authorized(request)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "the body is not JSON"}}, status=400)
        if not isinstance(body, dict) or body.get("model") != served_id(self.protocols):
            return web.json_response({"error": {"message": "no such model is served here"}}, status=404)
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), {})
        text = last.get("content") if isinstance(last.get("content"), str) else ""
        created = int(time.time())
        if not body.get("stream"):
            return web.json_response({
                "id": "chatcmpl-stand-in", "object": "chat.completion", "created": created, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            })
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for delta, finish in (({"role": "assistant", "content": text}, None), ({}, "stop")):
            chunk = {"id": "chatcmpl-stand-in", "object": "chat.completion.chunk", "created": created,
                     "model": body["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    async def get_personalization(self, request: web.Request) -> web.Response:
        self._authorized(request)
        return web.json_response(self.personalization)

    async def put_personalization(self, request: web.Request) -> web.Response:
        self._authorized(request)
        if not self.personalization["available"]:
            return web.json_response({"detail": "personalization is not available on this account's plan"}, status=403)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"detail": "the body is not JSON"}, status=422)
        if not isinstance(body, dict):
            return web.json_response({"detail": "the body is not an object"}, status=422)
        if "enabled" in body and not isinstance(body["enabled"], bool):
            return web.json_response({"detail": "`enabled` is a boolean"}, status=422)
        for name in PERSONALIZATION_FIELDS:
            if name in body and not isinstance(body[name], str):
                return web.json_response({"detail": f"`{name}` is a string"}, status=422)
        # A partial write changes only the fields it sends.
        for name in ("enabled", *PERSONALIZATION_FIELDS):
            if name in body:
                self.personalization[name] = body[name]
        return web.json_response(self.personalization)

    async def instance(self, request: web.Request) -> web.Response:
        self._authorized(request)
        return web.json_response({"name": "stand-in", "version": "0.1.0"})
