"""The server under test for this suite: a stand-in web server, fake-instance itself.

A real web server's suite overrides `lembas_instance_url` (its live server's URL) and
`lembas_hooks` (its test client doing what a person in the web UI would) the same way.
Here fake-instance, started without a scenario, plays the server: it serves discovery and the
link, and its web UI is driven over its control API. It serves the protocols of the test's cell
(`--protocol 1` is a server that speaks only protocol 1), as a real server under test would be
configured for the cell.

A test marked `@pytest.mark.stand_in("--misbehave", RULE)` gets a stand-in that breaks RULE.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lembas_doubles import Double, start_fake_instance


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stand_in(*args): more arguments for the stand-in server")


@pytest.fixture
def stand_in(
    request: pytest.FixtureRequest, lembas_protocol: int, lembas_spec: str, tmp_path
) -> Iterator[Double]:
    marker = request.node.get_closest_marker("stand_in")
    args = marker.args if marker else ()
    # Not through the plugin's fixtures: the stand-in is the system under test, whose own
    # verdict on fake-device is nobody's business here.
    with start_fake_instance(
        protocol=lembas_protocol, spec=lembas_spec, args=args, workdir=tmp_path / "stand-in"
    ) as server:
        yield server


@pytest.fixture
def lembas_instance_url(stand_in: Double) -> str:
    return stand_in.url


@pytest.fixture
def lembas_hooks(stand_in: Double) -> dict:
    # The web UI's actions a scenario's `peer:` asks for, done on the stand-in; a real suite
    # would call its server's test API here.
    return {
        # Its person answers cards with the web UI's defaults already: what `peer.cards: {}`
        # asks for, so there is nothing to set up.
        "answer_cards": lambda fields: {},
        "open_chat": lambda fields: stand_in.act({"open_chat": fields or {}}),
        "send": lambda fields: stand_in.act({"send": fields}),
    }
