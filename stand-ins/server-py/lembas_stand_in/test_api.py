"""The test API: what a person in the web UI does, for a test to drive (the suite's hooks call
it). Each answer is JSON; what the web UI cannot do is answered 404 (no such chat) or 409 (no
such device linked, or the device refused), which the suite takes as the action refused, and
what it does not implement at all 501 (a message with files), which makes the run not
applicable.

    POST   /test/chats                  {device?, cwd?, mode?, system_prompt?, library?, prototypes?}
                                                            -> {sessionId, device}
    POST   /test/chats/{chat}/messages  {text}                  -> {turnId} | {steered, messageId}
    POST   /test/chats/{chat}/cancel                            -> {sessionId}
    POST   /test/chats/{chat}/mode      {mode}                  -> {sessionId, mode}
    POST   /test/chats/{chat}/title     {title}                 -> the device's answer
    DELETE /test/chats/{chat}                                   -> {delivered}
    POST   /test/cards                  {permission?, question?, plan?, delay?, timeout?} -> {}
    POST   /test/personalization        {available}             -> {available}
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from .chats import Chats, Refused
from .http_api import HttpApi


class TestApi:
    def __init__(self, chats: Chats, api: HttpApi) -> None:
        self.chats = chats
        self.api = api

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/test/chats", self.open_chat),
            web.post("/test/chats/{chat}/messages", self.send),
            web.post("/test/chats/{chat}/cancel", self.cancel),
            web.post("/test/chats/{chat}/mode", self.set_mode),
            web.post("/test/chats/{chat}/title", self.rename),
            web.delete("/test/chats/{chat}", self.delete_chat),
            web.post("/test/cards", self.cards),
            web.post("/test/personalization", self.personalization),
        ]

    @staticmethod
    async def body(request: web.Request) -> dict[str, Any]:
        if not request.can_read_body:
            return {}
        try:
            body = await request.json()
        except json.JSONDecodeError as error:
            raise web.HTTPBadRequest(text=f"the body is not JSON: {error}") from error
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="the body is not an object")
        return body

    @staticmethod
    def answer(result: dict[str, Any]) -> web.Response:
        return web.json_response(result)

    @staticmethod
    def refusal(refused: Refused) -> web.Response:
        return web.json_response({"detail": refused.why}, status=refused.status)

    @staticmethod
    def text(body: dict[str, Any], name: str) -> str | None:
        value = body.get(name)
        return value if isinstance(value, str) else None

    async def open_chat(self, request: web.Request) -> web.Response:
        body = await self.body(request)
        try:
            context = {k: body[k] for k in ("system_prompt", "library", "prototypes") if k in body}
            return self.answer(
                await self.chats.open_chat(self.text(body, "device"), self.text(body, "cwd"), self.text(body, "mode"), context)
            )
        except Refused as refused:
            return self.refusal(refused)

    async def send(self, request: web.Request) -> web.Response:
        body = await self.body(request)
        if body.get("attach"):
            # 501: this web UI attaches no files; the suite takes the action as not applicable.
            return web.json_response({"detail": "this web UI attaches no files"}, status=501)
        try:
            return self.answer(await self.chats.send(request.match_info["chat"], self.text(body, "text") or ""))
        except Refused as refused:
            return self.refusal(refused)

    async def cancel(self, request: web.Request) -> web.Response:
        try:
            return self.answer(await self.chats.cancel(request.match_info["chat"]))
        except Refused as refused:
            return self.refusal(refused)

    async def set_mode(self, request: web.Request) -> web.Response:
        body = await self.body(request)
        try:
            return self.answer(await self.chats.set_mode(request.match_info["chat"], self.text(body, "mode") or ""))
        except Refused as refused:
            return self.refusal(refused)

    async def rename(self, request: web.Request) -> web.Response:
        body = await self.body(request)
        try:
            return self.answer(await self.chats.rename(request.match_info["chat"], self.text(body, "title") or ""))
        except Refused as refused:
            return self.refusal(refused)

    async def delete_chat(self, request: web.Request) -> web.Response:
        try:
            return self.answer(await self.chats.delete_chat(request.match_info["chat"]))
        except Refused as refused:
            return self.refusal(refused)

    async def personalization(self, request: web.Request) -> web.Response:
        body = await self.body(request)
        if isinstance(body.get("available"), bool):
            self.api.personalization["available"] = body["available"]
        return self.answer({"available": self.api.personalization["available"]})

    async def cards(self, request: web.Request) -> web.Response:
        self.chats.person.configure(await self.body(request))
        return self.answer({})
