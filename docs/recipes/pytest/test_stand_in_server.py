"""The pytest recipe, run in this repository's CI: fake-device against a stand-in web server
(fake-instance, started by the test as a real server's test would start it), with the web UI's
actions mapped to Python callables that drive the stand-in through its console, as a real
project's callables would drive its test client."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading

import pytest


class StandInServer:
    """fake-instance as a process: a URL, and its web UI driven by JSON lines on its stdin."""

    def __init__(self, binary: str, *args: str):
        self.process = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--console", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        line = self.process.stdout.readline()
        assert line.startswith("listening "), line
        self.url = line.split(" ", 1)[1].strip()
        self.results: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_console, daemon=True).start()

    def _read_console(self):
        for line in self.process.stderr:
            if line.startswith("console: "):
                self.results.put(line.strip())

    def act(self, action: dict) -> dict:
        """Does one web UI action and gives its result."""
        self.process.stdin.write(json.dumps(action) + "\n")
        self.process.stdin.flush()
        said = self.results.get(timeout=30)
        assert " -> " in said, said
        return json.loads(said.split(" -> ", 1)[1])

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _instance_binary() -> str:
    found = os.environ.get("LEMBAS_FAKE_INSTANCE") or shutil.which("fake-instance")
    if not found:
        pytest.skip("no fake-instance to stand in for a web server")
    return found


@pytest.fixture
def stand_in():
    servers = []

    def start(*args: str) -> StandInServer:
        server = StandInServer(_instance_binary(), *args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def test_a_well_behaved_server_passes_negotiate(fake_device, stand_in):
    server = stand_in()
    fake_device.run("device/negotiate.yaml", instance=server.url).assert_passed(strict=True)


def test_the_web_ui_s_actions_are_python_callables(fake_device, stand_in):
    server = stand_in()
    hooks = {
        # Its person answers cards with the web UI's defaults already, which is what
        # cards.yaml asks for (`peer.cards: {}`): nothing to set up.
        "answer_cards": lambda fields: {},
        "open_chat": lambda fields: server.act({"open_chat": fields or {}}),
        "send": lambda fields: server.act({"send": fields}),
    }
    verdict = fake_device.run("device/cards.yaml", instance=server.url, hooks=hooks)
    verdict.assert_passed(strict=True)


def test_a_missing_hook_is_not_applicable_not_a_failure(fake_device, stand_in):
    server = stand_in()
    verdict = fake_device.run("device/cards.yaml", instance=server.url)
    assert verdict.verdict == "not_applicable", verdict.report
    assert "needs hook" in verdict.why and "`open_chat`" in verdict.why, verdict.why


def test_a_server_that_breaks_a_rule_fails_naming_it(fake_device, stand_in):
    server = stand_in("--misbehave", "instance.initialize.protocol")
    verdict = fake_device.run("device/negotiate.yaml", instance=server.url, protocol=1)
    verdict.assert_failed_on("instance.initialize.protocol")
    assert verdict.exit_code == 1
