"""Hooks as Python callables: a loopback HTTP endpoint the double's `http` hooks call.

A double does the set-up a scenario's `peer:` asks for (a person in the web UI opening a chat, a
person at the CLI's terminal sharing a session, ...) through its hooks file, which maps each
action to a command, an HTTP request or a line on stdin. A Python test wants to do it with its
own code (its server's test client, its CLI's test API), so every callable gets an `http` hook
pointing here, and this server runs the callable with the action's fields.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Union

Hook = Callable[[Any], Any]
"""Gets the action's fields (a dict, or the bare value of an action like ``delete_chat``) and
returns the action's result (a dict such as ``{"sessionId": ...}`` that a scenario may capture),
or None."""

Hooks = Union[str, "os.PathLike[str]", Mapping[str, Union[Hook, Mapping[str, Any]]]]
"""A hooks file, or a mapping from action name to a callable or to a hook as the hooks file
writes it (``{"run": "..."}``, ``{"http": {...}}``, ``{"stdin": "..."}``)."""


class HookServer:
    """Runs each callable hook when the double calls its URL; other hooks pass through."""

    def __init__(self, hooks: Mapping[str, Hook | Mapping[str, Any]]):
        self.hooks = dict(hooks)
        self.errors: list[str] = []
        self._closed = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                name = self.path.rsplit("/", 1)[-1]
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    # `"{action}"` alone is `{name: fields}` itself (an older double sent it as
                    # a JSON string, decoded once more here).
                    action = body.get("action")
                    if isinstance(action, str):
                        action = json.loads(action)
                    fields = (action or {}).get(name)
                    result = server.hooks[name](fields)
                    status, answer = 200, result if result is not None else {}
                except Exception as e:  # noqa: BLE001 (the double's report shows it; the run is a set-up error)
                    server.errors.append(f"{name}: {e!r}")
                    status, answer = 500, {"error": repr(e)}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                # The test's output is not the place for one access line per hook.
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="lembas-hooks", daemon=True
        )
        self.thread.start()

    def entries(self) -> dict[str, Any]:
        """The hooks file's entries: callables become HTTP requests to this server."""
        entries: dict[str, Any] = {}
        for name, hook in self.hooks.items():
            if callable(hook):
                entries[name] = {
                    "http": {
                        "url": f"http://127.0.0.1:{self.port}/hooks/{name}",
                        "json": {"action": "{action}"},
                    }
                }
            else:
                entries[name] = dict(hook)
        return entries

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self.httpd.shutdown()
        self.httpd.server_close()


def write_hooks(hooks: Hooks, path: Path) -> tuple[Path, HookServer | None]:
    """Gives the hooks file to pass as ``--hooks``, and the server its callables need (if any)."""
    if isinstance(hooks, (str, os.PathLike)):
        return Path(hooks), None
    server = HookServer(hooks) if any(callable(h) for h in hooks.values()) else None
    entries = server.entries() if server else {name: dict(h) for name, h in hooks.items()}  # type: ignore[arg-type]
    # JSON is YAML: the double reads this as a hooks file.
    path.write_text(json.dumps(entries, indent=2))
    return path, server
