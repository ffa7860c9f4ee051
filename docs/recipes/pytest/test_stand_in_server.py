"""A LLeMbas web server's link tests with the lembas-doubles pytest plugin (see conftest.py for
what the project provides). The marker names the scenario fake-device plays against the server;
once the test body returns, the plugin waits for the verdict and fails the test with
fake-device's report unless the server passed. Run with ``pytest --lembas-protocols 1,2`` to
run each test once per protocol.

This repository runs these tests against its stand-in server (packages/test-packages.sh), as a
user would: the package pip-installed into a fresh virtual environment.
"""

from __future__ import annotations

import pytest

# strict: a scenario that does not apply fails these tests instead of skipping them, because the
# stand-in is known to support them; a project's tests usually leave that to the plugin.


@pytest.mark.lembas("negotiate.yaml", strict=True)
def test_a_well_behaved_server_passes_negotiate(fake_device):
    pass


@pytest.mark.lembas("cards.yaml", strict=True)
def test_the_web_ui_s_actions_are_python_callables(fake_device, server):
    # conftest.py's lembas_hooks open the chat and send the message on the server; the test body
    # may drive the server or read fake-device's journal meanwhile.
    request = fake_device.wait_for("session/request_permission", direction="out", timeout=60)
    assert request["msg"]["params"]["options"], request


class TestWithoutHooks:
    @pytest.fixture
    def lembas_hooks(self):
        # No hooks for these tests: nobody opens a chat in the web UI.
        return None

    @pytest.mark.lembas("cards.yaml")
    def test_a_missing_hook_is_not_applicable_not_a_failure(self, fake_device):
        # Taking the verdict means judging it here; left to the plugin, it would skip the test.
        verdict = fake_device.verdict()
        assert verdict.not_applicable, verdict.report
        assert "needs hook" in verdict.why and "`open_chat`" in verdict.why, verdict.why
        assert verdict.exit_code == 0


@pytest.mark.lembas("negotiate.yaml", protocol=1)
@pytest.mark.stand_in("--misbehave", "instance.initialize.protocol")
def test_a_server_that_breaks_a_rule_fails_naming_it(fake_device):
    verdict = fake_device.verdict()
    verdict.assert_failed_on("instance.initialize.protocol")
    assert verdict.exit_code == 1
