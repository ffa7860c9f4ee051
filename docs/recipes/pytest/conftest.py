"""A LLeMbas web server's conftest.py for the lembas-doubles pytest plugin
(``pip install lembas-doubles``: the plugin, its ``fake_device`` fixture and the ``lembas``
marker come with the package, nothing to import).

The plugin needs two things from the project, as fixtures of this name:

- ``lembas_instance_url``: the base URL of the server under test, which fake-device dials;
- ``lembas_hooks``: the web UI's actions a scenario's set-up asks for (a person opening a chat,
  sending a message, ...), each a Python callable that does it with the project's own test
  client. A scenario that needs an action without a hook is *not applicable*, never a failure.

Here the server under test (``live_server``, as pytest-django and pytest-flask call theirs) is a
stand-in, fake-instance itself, started as a process the way a real project starts its server,
configured for the test's cell, its web UI driven by JSON lines on its console; a real project
starts its own server and calls its test client in the hooks instead.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Iterator

import pytest

from lembas_doubles import binary


class StandInServer:
    """fake-instance as the web server under test: a URL, and a web UI driven by its console."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen(
            [binary("fake-instance"), "--listen", "127.0.0.1:0", "--console", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        line = self.process.stdout.readline()
        assert line.startswith("listening "), line
        self.url = line.split(" ", 1)[1].strip()
        self.results: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_console, daemon=True).start()

    def _read_console(self) -> None:
        for line in self.process.stderr:
            if line.startswith("console: "):
                self.results.put(line.strip())

    def act(self, action: dict) -> dict:
        """Does one web UI action and gives its result (what a scenario may capture)."""
        self.process.stdin.write(json.dumps(action) + "\n")
        self.process.stdin.flush()
        said = self.results.get(timeout=30)
        assert " -> " in said, said
        return json.loads(said.split(" -> ", 1)[1])

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "stand_in(*args): start the stand-in server with these arguments"
    )


@pytest.fixture
def live_server(
    request: pytest.FixtureRequest, lembas_protocol: int, lembas_spec: str
) -> Iterator[StandInServer]:
    # `pytest --lembas-protocols 1,2` runs each test once per cell; the server under test is
    # configured for it (in a protocol-1 cell it speaks only protocol 1).
    marker = request.node.get_closest_marker("stand_in")
    args = marker.args if marker else ()
    server = StandInServer("--protocol", str(lembas_protocol), "--spec", lembas_spec, *args)
    yield server
    server.close()


@pytest.fixture
def lembas_instance_url(live_server):
    return live_server.url


@pytest.fixture
def lembas_hooks(live_server):
    return {
        # Its person answers cards with the web UI's defaults already, which is what cards.yaml
        # asks for (`peer.cards: {}`): nothing to set up.
        "answer_cards": lambda fields: {},
        "open_chat": lambda fields: live_server.act({"open_chat": fields or {}}),
        "send": lambda fields: live_server.act({"send": fields}),
    }
