"""A LLeMbas web server's link tests with the lembas-doubles pytest plugin (conftest.py gives it
the server under test and the web UI's actions). The marker names the scenario fake-device
plays against the server; once the test body returns, the plugin waits for the verdict and fails
the test with fake-device's report unless the server passed (a scenario the server does not
apply to skips the test, saying why).

    pytest --lembas-protocols 1,2 --lembas-specs 1.0.0,1.1.0

runs each test once per cell. This repository runs these tests against its stand-in server as a
user would, the package pip-installed into a fresh virtual environment
(packages/test-packages.sh, python job).
"""

from __future__ import annotations

import pytest


@pytest.mark.lembas("negotiate.yaml")
def test_negotiate(fake_device):
    pass  # fake-device runs the scenario; its verdict is the test's


@pytest.mark.lembas("cards.yaml")
def test_the_web_ui_s_actions_are_python_callables(fake_device):
    # conftest.py's lembas_hooks open the chat and send the message on the server; meanwhile the
    # test may drive the server itself, or read what fake-device said and heard.
    asked = fake_device.wait_for("session/request_permission", direction="out", timeout=60)
    assert asked["msg"]["params"]["options"], asked


class TestWithoutHooks:
    @pytest.fixture
    def lembas_hooks(self):
        # Nobody to open a chat in the web UI, for the tests of this class.
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
