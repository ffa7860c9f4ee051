"""The web UI's chats, each on a device's session: opening, writing (a prompt, or a steer while a
turn runs), stopping, renaming, deleting (kept and sent again until answered), and reattaching
to a turn a dropped link left unknown.

Only what the device listed is asked of it (spec: Versions and discovery): turn ids with
``turns``, steers with ``steer``, deletes with ``delete``, status with ``status``. A device that
does not list ``sessions`` does not keep a session id across links: a chat gets a new session
there when it is next written in.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import TextContentBlock

from .person import Person

if TYPE_CHECKING:
    from .link import Link

#: The capability that makes a device read each piece of a chat's Context.
CONTEXT_CAPABILITY = {"system_prompt": "context", "library": "library", "prototypes": "prototypes"}
#: How many sessions the device said it deleted are remembered.
DELETED_KEPT = 1000
#: Refusals after which a kept delete is given up (spec: `_lembas/session/delete`).
DELETE_REFUSALS = 5
#: How often (50 ms apart) opening a chat looks for a link being initialized.
LINK_WAIT_TRIES = 40
#: How long a request of the web UI waits for the device.
ANSWER_WITHIN = 30.0


class Refused(Exception):
    """What the web UI cannot do: its test API answers it as a refusal (404, 409)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


@dataclass
class Turn:
    id: str
    text: str
    #: `sent`: its answer not in yet; `done`; `unknown`: a dropped link took its answer.
    state: str = "sent"


@dataclass
class Chat:
    #: The chat's id: the session the device first gave it (the test API's name for it).
    id: str
    token: str
    cwd: str
    session: str
    mode: str | None = None
    #: The chat's Context: `system_prompt`, `library`, `prototypes` (spec: session/new).
    context: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    running: Turn | None = None
    #: The device does not keep its session across links: a new one is opened before the next prompt.
    stale: bool = False


class Chats:
    def __init__(self, model_id: str, state_dir: Path | None = None) -> None:
        self.model_id = model_id
        self.person = Person()
        self.links: dict[str, Link] = {}
        self.chats: dict[str, Chat] = {}
        #: Deletes not yet answered, per device token: session → refusals so far.
        self.pending: dict[str, dict[str, int]] = {}
        self._ids = itertools.count(1)
        #: Sessions the device said it deleted (the newest): a chat still being opened on one
        #: when the word came is deleted as it is made.
        self.deleted: dict[str, None] = {}
        #: Where chats, their turns in flight and kept deletes outlive a restart.
        self.state = state_dir / "chats.json" if state_dir else None
        self._load()

    # What outlives a restart.

    def _load(self) -> None:
        if self.state is None or not self.state.exists():
            return
        saved = json.loads(self.state.read_text())
        for raw in saved.get("chats", []):
            turns = [Turn(**t) for t in raw.pop("turns", [])]
            raw.pop("running", None)
            chat = Chat(**raw, turns=turns)
            # A turn whose answer had not come when the server stopped is unknown now.
            for turn in chat.turns:
                if turn.state in ("sent", "unknown"):
                    turn.state = "unknown"
                    chat.running = chat.running or turn
            self.chats[chat.id] = chat
        self.pending = saved.get("pending", {})

    def _save(self) -> None:
        if self.state is None:
            return
        chats = []
        for chat in self.chats.values():
            raw = asdict(chat)
            raw.pop("running", None)
            chats.append(raw)
        self.state.parent.mkdir(parents=True, exist_ok=True)
        written = self.state.with_suffix(".tmp")
        written.write_text(json.dumps({"chats": chats, "pending": self.pending}))
        os.replace(written, self.state)

    # The links.

    async def linked(self, link: Link) -> None:
        self.links[link.token] = link
        for chat in self.chats.values():
            if chat.token == link.token and not link.lists("sessions"):
                chat.stale = True
        if link.lists("delete"):
            for session in list(self.pending.get(link.token, {})):
                asyncio.create_task(self._deliver_delete(link, session))
        if link.lists("sessions"):
            for chat in self.chats.values():
                turn = chat.running
                if chat.token == link.token and turn is not None and turn.state == "unknown":
                    asyncio.create_task(self._reattach(link, chat, turn))

    def unlinked(self, link: Link) -> None:
        if self.links.get(link.token) is link:
            del self.links[link.token]

    def link_of(self, token: str | None) -> Link:
        link = self._linked(token)
        if link is None:
            raise Refused(409, "no such device is linked")
        return link

    def _linked(self, token: str | None) -> Link | None:
        if token is not None:
            return self.links.get(token)
        return next(reversed(self.links.values()), None) if self.links else None

    async def link_soon(self, token: str | None) -> Link:
        """The device's link, waiting a little for one being initialized right now (the test
        may act the moment the device has answered, before this server has read the answer)."""
        for _ in range(LINK_WAIT_TRIES):
            link = self._linked(token)
            if link is not None:
                return link
            await asyncio.sleep(0.05)
        return self.link_of(token)

    def chat(self, chat_id: str) -> Chat:
        chat = self.chats.get(chat_id)
        if chat is None:
            raise Refused(404, f"no chat {chat_id}")
        return chat

    # What the device says.

    def updated(self, session_id: str, update: Any) -> None:
        """A session update: this web UI draws nothing, so nothing is kept."""

    async def notified(self, link: Link, method: str, params: dict[str, Any]) -> None:
        session = params.get("sessionId")
        if method == "_lembas/session/deleted" and isinstance(session, str):
            # Deleted on the device: the chat goes; one this server never had is ignored.
            self.deleted[session] = None
            while len(self.deleted) > DELETED_KEPT:
                self.deleted.pop(next(iter(self.deleted)))
            for chat_id, chat in list(self.chats.items()):
                if chat.session == session and chat.token == link.token:
                    del self.chats[chat_id]
            self._save()
            return
        if method == "_lembas/permission/settled":
            call = params.get("toolCallId")
            if isinstance(call, str):
                self.person.settle(call)
            return
        if method == "_lembas/event" and isinstance(session, str):
            event = params.get("event") if isinstance(params.get("event"), dict) else {}
            if event.get("type") == "task" and event.get("state") == "end":
                for chat in self.chats.values():
                    if chat.session == session and chat.running and chat.running.id == event.get("turnId"):
                        self._finished(chat, chat.running)

    # The web UI's actions.

    async def open_chat(
        self, token: str | None, cwd: str | None, mode: str | None, context: dict[str, Any]
    ) -> dict[str, Any]:
        link = await self.link_soon(token)
        cwd = cwd or (link.roots[0] if link.roots else None)
        if cwd is None:
            raise Refused(409, "the device allows no folder yet")
        chat = Chat(id="", token=link.token, cwd=cwd, session="", mode=mode, context=context)
        session = await self._new_session(link, chat)
        chat.id = chat.session = session
        if session not in self.deleted:
            self.chats[chat.id] = chat
            self._save()
        return {"sessionId": session, "device": link.token}

    async def _new_session(self, link: Link, chat: Chat) -> str:
        cwd = chat.cwd
        meta: dict[str, Any] = {"lembas_model": self.model_id}
        if chat.mode is not None:
            meta["mode"] = chat.mode
        # What only this server knows of the chat, each piece only to a device that reads it;
        # on session/new alone (the device keeps it for the prompts).
        lembas = {k: v for k, v in chat.context.items() if link.lists(CONTEXT_CAPABILITY[k])}
        if lembas:
            meta["lembas"] = lembas
        if link.connection is None:
            raise Refused(409, "the device is not linked")
        try:
            answer = await asyncio.wait_for(
                link.connection.new_session(cwd=cwd, mcp_servers=[], **meta), ANSWER_WITHIN
            )
        except RequestError as error:
            raise Refused(409, f"the device refused the chat: {error}") from error
        return answer.session_id

    async def send(self, chat_id: str, text: str) -> dict[str, Any]:
        chat = self.chat(chat_id)
        link = self.link_of(chat.token)
        if chat.stale:
            chat.session = await self._new_session(link, chat)
            chat.stale = False
        if chat.running is not None and link.lists("steer"):
            message_id = f"msg_{next(self._ids)}"
            try:
                await link.request("_lembas/steer", {"sessionId": chat.session, "text": text, "messageId": message_id})
                return {"steered": True, "messageId": message_id}
            except RequestError:
                pass  # Nothing runs after all: it goes as a prompt.
        return {"turnId": self._prompt(link, chat, text, f"msg_{uuid.uuid4().hex[:12]}").id}

    def _prompt(self, link: Link, chat: Chat, text: str, turn_id: str) -> Turn:
        turn = next((t for t in chat.turns if t.id == turn_id), None) or Turn(turn_id, text)
        if turn not in chat.turns:
            chat.turns.append(turn)
        turn.state = "sent"
        chat.running = chat.running or turn
        self._save()
        asyncio.create_task(self._run(link, chat, turn))
        return turn

    async def _run(self, link: Link, chat: Chat, turn: Turn) -> None:
        meta: dict[str, Any] = {}
        if link.lists("turns"):
            meta["lembas"] = {"turnId": turn.id}
        assert link.connection is not None
        try:
            answer = await link.connection.prompt(
                session_id=chat.session, prompt=[TextContentBlock(type="text", text=turn.text)], **meta
            )
        except ConnectionError:
            turn.state = "unknown"  # The link dropped: reattach when it is back.
            self._save()
            # The device may have linked again before this link's end was read: reattach on
            # that link now, as `linked` would have had the turn been unknown then.
            current = self._linked(chat.token)
            if current is not None and current is not link and current.lists("sessions"):
                asyncio.create_task(self._reattach(current, chat, turn))
            return
        except RequestError:
            self._finished(chat, turn)
            return
        self._finished(chat, turn)
        unsent = ((answer.field_meta or {}).get("lembas") or {}).get("unsent") or []
        # What the turn ended before taking in is sent next, as the person's next message.
        for text in unsent:
            if isinstance(text, str) and chat.id in self.chats and not link.closed:
                self._prompt(link, chat, text, f"msg_{uuid.uuid4().hex[:12]}")

    def _finished(self, chat: Chat, turn: Turn) -> None:
        turn.state = "done"
        if chat.running is turn:
            chat.running = next((t for t in chat.turns if t.state == "sent"), None)
        self._save()

    async def _reattach(self, link: Link, chat: Chat, turn: Turn) -> None:
        """A turn a dropped link left unknown (spec: `_lembas/session/status`, reattaching)."""
        if link.lists("status"):
            try:
                status = await link.request("_lembas/session/status", {"sessionId": chat.session})
            except (RequestError, ConnectionError):
                return
            if status.get("turnId") == turn.id or turn.id in (status.get("queued") or []):
                turn.state = "sent"  # Running or queued: followed until its task ends.
                return
            if status.get("lastTurnId") == turn.id or not status.get("exists", True):
                # Finished meanwhile: its answer is imported from the session's history.
                if status.get("exists", True):
                    with contextlib.suppress(RequestError, ConnectionError):
                        await link.request("_lembas/session/history", {"sessionId": chat.session})
                self._finished(chat, turn)
                return
        if link.lists("turns"):
            # Unknown to the device: sent again with its turn id (it deduplicates).
            self._prompt(link, chat, turn.text, turn.id)
        else:
            # Without turn ids a prompt sent again could run twice: its outcome stays unknown.
            self._finished(chat, turn)

    async def cancel(self, chat_id: str) -> dict[str, Any]:
        chat = self.chat(chat_id)
        link = self.link_of(chat.token)
        assert link.connection is not None
        await link.connection.cancel(session_id=chat.session)
        return {"sessionId": chat.session}

    async def set_mode(self, chat_id: str, mode: str) -> dict[str, Any]:
        chat = self.chat(chat_id)
        link = self.link_of(chat.token)
        assert link.connection is not None
        try:
            await link.connection.set_session_mode(session_id=chat.session, mode_id=mode)
        except RequestError as error:
            raise Refused(409, f"the device refused the mode: {error}") from error
        chat.mode = mode
        return {"sessionId": chat.session, "mode": mode}

    async def rename(self, chat_id: str, title: str) -> dict[str, Any]:
        chat = self.chat(chat_id)
        link = self.link_of(chat.token)
        if not link.lists("title"):
            raise Refused(409, "the device cannot rename its sessions")
        # The title field keeps 200 characters (spec: `_lembas/session/title`).
        try:
            return await link.request("_lembas/session/title", {"sessionId": chat.session, "title": title[:200]})
        except RequestError as error:
            raise Refused(409, f"the device refused the title: {error}") from error

    async def delete_chat(self, chat_id: str) -> dict[str, Any]:
        chat = self.chat(chat_id)
        del self.chats[chat_id]
        link = self.links.get(chat.token)
        self.pending.setdefault(chat.token, {})[chat.session] = 0
        self._save()
        if link is None:
            return {"delivered": False}
        if not link.lists("delete"):
            self.pending[chat.token].pop(chat.session, None)
            return {"delivered": False}
        return {"delivered": await self._deliver_delete(link, chat.session)}

    async def _deliver_delete(self, link: Link, session: str) -> bool:
        """Sends a kept delete; answered, it is forgotten; refused five times, given up."""
        kept = self.pending.get(link.token, {})
        try:
            await asyncio.wait_for(link.request("_lembas/session/delete", {"sessionId": session}), ANSWER_WITHIN)
        except RequestError:
            kept[session] = kept.get(session, 0) + 1
            if kept[session] >= DELETE_REFUSALS:
                kept.pop(session, None)
            self._save()
            return False
        except (ConnectionError, asyncio.TimeoutError):
            return False
        kept.pop(session, None)
        self._save()
        return True

    async def closed(self) -> None:
        for link in list(self.links.values()):
            if link.connection is not None:
                with contextlib.suppress(Exception):
                    await link.connection.close()
