"""A pytest fixture for a LLeMbas web server's tests: run fake-device against the server under
test, with the web UI's actions (open a chat, send a message, ...) mapped to Python callables
that drive the server's own test client, and assert on the verdict.

Copy this file next to your tests (or into ``conftest.py``). It needs the ``fake-device``
binary: on ``PATH``, or named by ``LEMBAS_FAKE_DEVICE``.

    def test_negotiate(fake_device, live_server):
        fake_device.run("device/negotiate.yaml", instance=live_server.url).assert_passed()

    def test_cards(fake_device, live_server, client):
        hooks = {
            "open_chat": lambda fields: client.post("/api/test/chats", json=fields).json(),
            "send": lambda fields: client.post(f"/api/test/chats/{fields['chat']}/messages",
                                               json=fields).json(),
        }
        fake_device.run("device/cards.yaml", instance=live_server.url, hooks=hooks).assert_passed()

A hook gets the action's fields (a dict, or the bare value for an action like ``delete_chat``)
and returns what the action gave (a dict such as ``{"sessionId": ...}``, which a scenario may
capture). An action the scenario needs that has no hook makes the run *not applicable*, never a
failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

Hook = Callable[[Any], Any]


@dataclass
class Verdict:
    """What fake-device said of the server: its exit code, verdict and reports."""

    exit_code: int
    verdict: str
    """``passed``, ``not_applicable``, ``failed`` or ``scenario_error``."""
    why: str | None
    broken_rules: list[str]
    report: str
    """The human report fake-device printed (steps, the rule broken, the diff)."""
    outcome: dict = field(default_factory=dict)

    def assert_passed(
        self, *, strict: bool = False, allow_not_applicable: bool | None = None
    ) -> None:
        """Fails the test with fake-device's report unless the server passed. A scenario that
        did not apply to what the server lists is no failure, as everywhere in the suite: the
        test is skipped, saying why; ``strict=True`` makes it a failure."""
        if allow_not_applicable is not None:
            strict = not allow_not_applicable
        if self.verdict == "not_applicable" and not strict:
            pytest.skip(f"fake-device: not applicable: {self.why}")
        assert self.verdict == "passed", f"fake-device: {self.verdict}\n{self.report}"

    def assert_failed_on(self, rule: str) -> None:
        """Fails the test unless the server was caught breaking ``rule``."""
        assert self.verdict == "failed" and rule in self.broken_rules, (
            f"expected a failure on {rule}, got {self.verdict} {self.broken_rules}\n{self.report}"
        )


class _HookServer:
    """A local HTTP endpoint fake-device's hooks call; each action runs a Python callable."""

    def __init__(self, hooks: dict[str, Hook]):
        self.hooks = hooks
        self.errors: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the standard library's name)
                name = self.path.rsplit("/", 1)[-1]
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                try:
                    # `"{action}"` alone is `{name: fields}` itself (an older double sent it as
                    # a JSON string, decoded here).
                    action = body.get("action")
                    if isinstance(action, str):
                        action = json.loads(action)
                    fields = (action or {}).get(name)
                    result = server.hooks[name](fields)
                    status, answer = 200, result if result is not None else {}
                except Exception as e:  # the report shows it, and the run is a set-up error
                    server.errors.append(f"{name}: {e!r}")
                    status, answer = 500, {"error": repr(e)}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def write_hooks(self, path: Path) -> None:
        # JSON is YAML. `"{action}"` alone is `{name: fields}`, as JSON, in the request's body.
        hooks = {
            name: {
                "http": {
                    "url": f"http://127.0.0.1:{self.port}/hooks/{name}",
                    "json": {"action": "{action}"},
                }
            }
            for name in self.hooks
        }
        path.write_text(json.dumps(hooks, indent=2))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeDevice:
    """fake-device, run once per call of :meth:`run`."""

    def __init__(self, binary: str, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self._runs = 0

    def run(
        self,
        scenario: str,
        *,
        instance: str | None = None,
        exec: str | None = None,
        hooks: dict[str, Hook] | None = None,
        protocol: int = 2,
        spec: str = "1.1.0",
        token: str = "lembas-test-token",
        args: tuple[str, ...] = (),
        timeout: float = 120.0,
    ) -> Verdict:
        """Runs ``scenario`` (a file, or an embedded one such as ``device/cards.yaml``) against
        the server at ``instance``, or one fake-device starts with ``exec`` (``{port}`` in it),
        and gives the verdict."""
        self._runs += 1
        report = self.workdir / f"run-{self._runs}.json"
        root = self.workdir / f"root-{self._runs}"
        root.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary,
            "--scenario", scenario.removeprefix("device/"),
            "--protocol", str(protocol),
            "--spec", spec,
            "--token", token,
            "--root", str(root),
            "--state-dir", str(self.workdir / f"state-{self._runs}"),
            "--report", f"json:{report}",
            *args,
        ]
        if instance:
            command += ["--instance", instance]
        if exec:
            command += ["--exec", exec]
        server = _HookServer(hooks) if hooks else None
        try:
            if server:
                hooks_file = self.workdir / f"hooks-{self._runs}.yaml"
                server.write_hooks(hooks_file)
                command += ["--hooks", str(hooks_file)]
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout,
                env={**os.environ, "NO_COLOR": "1"},
            )
        finally:
            if server:
                server.close()
        text = done.stdout + done.stderr
        if server and server.errors:
            text += "\nhooks raised:\n" + "\n".join(server.errors)
        if not report.exists():
            return Verdict(done.returncode, "error", text.strip(), [], text)
        written = json.loads(report.read_text())
        outcome = written.get("outcome", {})
        return Verdict(
            exit_code=done.returncode,
            verdict=written["verdict"],
            why=outcome.get("not_applicable"),
            broken_rules=[r["id"] for r in written.get("broken_rules", [])],
            report=text,
            outcome=outcome,
        )


def _binary() -> str:
    found = os.environ.get("LEMBAS_FAKE_DEVICE") or shutil.which("fake-device")
    if not found:
        pytest.skip("no fake-device: put it on PATH or name it in LEMBAS_FAKE_DEVICE")
    return found


@pytest.fixture
def fake_device(tmp_path: Path) -> FakeDevice:
    """A fake-device to run scenarios against the web server under test."""
    return FakeDevice(_binary(), tmp_path)
