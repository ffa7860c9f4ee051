"""python -m lembas_stand_in --port PORT --token TOKEN [--token T] [--protocols 1,2] [--state-dir DIR]"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from aiohttp import web

from .chats import Chats
from .http_api import HttpApi, served_id
from .link import Link
from .test_api import TestApi

LINK_PATH = "/api/devices/link"


def build(tokens: list[str], protocols: list[int], state_dir: Path | None = None) -> web.Application:
    api = HttpApi(tokens, protocols)
    chats = Chats(served_id(protocols), state_dir)
    tests = TestApi(chats, api)

    async def link(request: web.Request) -> web.StreamResponse:
        # The device token is checked on the upgrade: a wrong one is refused with 401.
        token = api.device_token(request)
        if token is None:
            return web.json_response({"detail": "a device token is needed"}, status=401)
        socket = web.WebSocketResponse(max_msg_size=16 * 1024 * 1024, heartbeat=None)
        await socket.prepare(request)
        device = Link(token, chats)
        try:
            await device.serve(socket, protocols)
        finally:
            device.ended()
        return socket

    app = web.Application()
    app.add_routes([web.get(LINK_PATH, link), *api.routes(), *tests.routes()])

    async def close_links(_: web.Application) -> None:
        await chats.closed()

    app.on_shutdown.append(close_links)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="lembas_stand_in", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token", action="append", required=True, help="a device token it accepts")
    parser.add_argument("--protocols", default="1,2", help="the link protocols discovery lists")
    parser.add_argument("--state-dir", type=Path, help="where chats and kept deletes outlive a restart")
    args = parser.parse_args()
    protocols = sorted({int(p) for p in args.protocols.split(",") if p.strip()})
    logging.basicConfig(level=logging.WARNING)
    app = build(args.token, protocols, args.state_dir)

    async def serve() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, args.host, args.port).start()
        print(f"listening http://{args.host}:{args.port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
