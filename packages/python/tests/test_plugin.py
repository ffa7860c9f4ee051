"""The plugin as its users use it, against stand-ins: fake-instance as the web server under test
for `fake_device` (conftest.py), and fake-device as the CLI under test for `fake_instance`.

Run with `--lembas-protocols 1,2` (as packages/test-packages.sh does), every test that uses a
double runs in both cells.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lembas_doubles import Verdict, binary

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent


# -- a web server's tests: fake_device -----------------------------------------------------------


@pytest.mark.lembas("negotiate.yaml")
def test_a_well_behaved_server_passes_negotiate(fake_device, lembas_protocol):
    # The handle reads the journal while the scenario runs: the device said the cell's protocol.
    hello = fake_device.wait_for("_lembas/hello", direction="out")
    assert hello["msg"]["params"]["protocol"] == lembas_protocol
    assert fake_device.url.startswith("http://127.0.0.1:")
    assert fake_device.token == "lembas-test-token"
    # Nothing else: once the body returns, the plugin waits for the verdict and judges it.


@pytest.mark.lembas("device/cards.yaml")
def test_the_web_ui_s_actions_are_python_callables(fake_device, stand_in):
    # conftest.py's lembas_hooks opens the chat and sends the message on the stand-in. The test
    # may also take the verdict itself, and then judges it.
    verdict = fake_device.verdict()
    verdict.assert_passed()
    assert any(chat for chat in stand_in.state()["peer"]["chats"])


# -- a CLI's tests: fake_instance ----------------------------------------------------------------

# The CLI under test is fake-device playing one, started by fake-instance itself (`exec`) with
# the instance's URL and token, as a real CLI's command would be, and implementing the cell's spec.
STAND_IN_CLI = (
    f"exec {shlex.quote(binary('fake-device'))} --instance {{url}} --token {{token}} "
    f"--root {{root}} --state-dir {{tmp}}/state --spec {{spec}}"
)


@pytest.mark.lembas("negotiate.yaml", exec=STAND_IN_CLI)
def test_a_well_behaved_cli_passes_negotiate(fake_instance):
    assert fake_instance.url.startswith("http://127.0.0.1:")
    link = fake_instance.wait_for("_lembas/hello", direction="in")
    assert link["link"] >= 1


def test_a_simulated_instance_is_driven_from_the_test(
    fake_instance, lembas_doubles, lembas_protocol, lembas_spec
):
    # No scenario: fake-instance is a simulated LLeMbas whose web UI the test drives, and its
    # verdict is what its monitors found in the CLI (here a second double, started in the test).
    lembas_doubles.fake_device(fake_instance.url, protocol=lembas_protocol, spec=lembas_spec)
    chat = fake_instance.act({"open_chat": {}}, within_ms=20_000)
    fake_instance.act({"send": {"chat": chat["sessionId"], "text": "hello there"}})
    # The echo agent answers with the prompt, streamed as session updates.
    update = fake_instance.wait_for(
        "session/update",
        direction="in",
        where=lambda entry: "hello" in json.dumps(entry["msg"]),
        timeout=20,
    )
    assert update["msg"]["params"]["sessionId"] == chat["sessionId"]
    assert fake_instance.state()["findings"] == []


# -- the plugin's verdicts, through pytest's own machinery ---------------------------------------

INNER_TESTS = textwrap.dedent(
    """
    import pytest

    @pytest.mark.lembas("negotiate.yaml")
    def test_passes(fake_device):
        pass

    @pytest.mark.lembas("negotiate.yaml")
    @pytest.mark.stand_in("--misbehave", "instance.initialize.protocol")
    def test_fails_on_purpose(fake_device):
        pass

    @pytest.fixture
    def lembas_hooks():
        return None  # nobody to open a chat: cards.yaml does not apply

    @pytest.mark.lembas("cards.yaml")
    def test_not_applicable_is_skipped(fake_device):
        pass
    """
)


def test_a_failing_verdict_fails_the_test_with_the_report(pytester: pytest.Pytester):
    # A separate pytest run, as a user's: the plugin comes from the installed entry point, the
    # stand-in server from this folder's conftest.py.
    pytester.makeconftest((HERE / "conftest.py").read_text())
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess(
        "--junitxml=inner.xml", "--lembas-protocols", "1,2", "-rs"
    )

    result.assert_outcomes(passed=2, failed=2, skipped=2)
    # The failure is the double's report: the verdict and rule, the failing step, what came.
    result.stdout.fnmatch_lines(
        [
            "*fake-device: failed (broke instance.initialize.protocol)*",
            "*FAIL *check init.clientCapabilities._meta*",
            "*rule instance.initialize.protocol:*",
            "*FAILED: the peer broke instance.initialize.protocol*",
        ]
    )
    result.stdout.fnmatch_lines(["*not applicable: *needs hook *`open_chat`*"])

    # The doubles' JUnit lands in pytest's: properties on each test case, and the double's own
    # suite (its steps as test cases) beside pytest's.
    root = ET.parse(pytester.path / "inner.xml").getroot()
    cases = {case.get("name"): case for case in root.iter("testcase")}
    failing = cases["test_fails_on_purpose[protocol-1]"]
    properties = {p.get("name"): p.get("value") for p in failing.iter("property")}
    assert properties["lembas.fake-device.verdict"] == "failed"
    assert properties["lembas.fake-device.broken_rules"] == "instance.initialize.protocol"
    assert properties["lembas.fake-device.cell"] == "protocol 1 · spec 1.1.0"
    suites = [s.get("name") for s in root.findall("testsuite")]
    assert any(
        "test_fails_on_purpose[protocol-2] › fake-device · negotiate" in s for s in suites
    ), suites
    double_suite = next(
        s for s in root.findall("testsuite") if "test_fails_on_purpose[protocol-1]" in s.get("name")
    )
    assert int(double_suite.get("failures")) >= 1
    assert any(
        case.find("failure") is not None and "5.1" in case.get("name")
        for case in double_suite.iter("testcase")
    )


def test_lembas_protocols_parametrizes_only_the_tests_with_a_double(pytester: pytest.Pytester):
    pytester.makeconftest((HERE / "conftest.py").read_text())
    pytester.makepyfile(
        test_inner=INNER_TESTS
        + textwrap.dedent(
            """
        def test_without_a_double():
            pass

        @pytest.mark.lembas("negotiate.yaml", protocol=1)
        def test_fixed_cell(fake_device):
            pass
        """
        )
    )
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--lembas-protocols", "1,2", "--lembas-specs", "1.0.0,1.1.0"
    )
    result.stdout.fnmatch_lines(
        [
            "test_inner.py::test_passes[protocol-1-spec-1.0.0]",
            "test_inner.py::test_passes[protocol-2-spec-1.1.0]",
            "test_inner.py::test_without_a_double",
            "test_inner.py::test_fixed_cell[spec-1.0.0]",
        ]
    )
    assert "test_fixed_cell[protocol" not in result.stdout.str()
    bad = pytester.runpytest_subprocess("--collect-only", "--lembas-protocols", "3")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--lembas-protocols 3: say a comma-separated list of 1, 2*"])


def test_the_binaries_are_installed_beside_the_package():
    # The wheel put all three commands where this Python finds its scripts, and they run.
    for name in ("fake-instance", "fake-device", "harness"):
        done = subprocess.run(
            [binary(name), "--version"], capture_output=True, text=True, check=True
        )
        assert done.stdout.split()[0] == name, done.stdout
        # The release, and the spec versions the doubles judge by (issue 14).
        assert "harness spec 1.0.0, 1.1.0" in done.stdout, done.stdout


def test_not_applicable_is_no_failure_unless_strict_the_one_switch():
    def verdict(strict: bool) -> Verdict:
        return Verdict(
            double="fake-device",
            exit_code=1 if strict else 0,
            verdict="not_applicable",
            why="needs hook `open_chat`",
            broken_rules=[],
            report="",
            strict=strict,
        )

    # Under pytest it skips, as the plugin does, saying why.
    with pytest.raises(pytest.skip.Exception, match="needs hook `open_chat`"):
        verdict(strict=False).assert_passed()
    with pytest.raises(AssertionError):
        verdict(strict=False).assert_passed(strict=True)
    with pytest.raises(AssertionError):
        verdict(strict=True).assert_passed()
