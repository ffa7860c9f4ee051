"""The pytest plugin: ``fake_instance`` and ``fake_device`` fixtures, ``--lembas-protocols``.

Loaded by pytest through the ``pytest11`` entry point once the wheel is installed.

    @pytest.mark.lembas("negotiate.yaml")
    def test_the_server_negotiates(fake_device):       # fake-device dials lembas_instance_url
        ...                                            # act, read the journal, or just wait

    @pytest.mark.lembas("negotiate.yaml")
    def test_the_cli_negotiates(fake_instance):
        run_my_cli("serve", "--url", fake_instance.url, "--token", fake_instance.token)

The fixture starts the double before the test; once the test body returns, the plugin waits for
the double's verdict and fails the test with the double's report unless the peer passed (a
scenario that does not apply to the peer skips the test, saying why). A test that takes the
verdict itself (``fake_device.verdict()``) is left to judge it. The double's JUnit goes into
pytest's own ``--junitxml`` report: its suite is added beside pytest's, and the test case gets
``lembas.*`` properties (verdict, scenario, cell, rules broken).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ._doubles import (
    DEFAULT_PROTOCOL,
    DEFAULT_SPEC,
    Double,
    LembasError,
    Verdict,
    start_fake_device,
    start_fake_instance,
)

_SPECS = ("1.0.0", "1.1.0")
_PROTOCOLS = (1, 2)
# The marker's keywords the fixtures read (anything else is a mistake worth saying).
_MARKER_KEYS = {
    "scenario",
    "protocol",
    "spec",
    "hooks",
    "exec",
    "arranged",
    "strict",
    "args",
    "token",
    "timeout",
}

_runs_key = pytest.StashKey["_Runs"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lembas", "LLeMbas link doubles (lembas-doubles)")
    group.addoption(
        "--lembas-protocols",
        metavar="LIST",
        default=None,
        help="run each test that uses fake_instance or fake_device once per link protocol in "
        "LIST (comma-separated: 1,2). Default: protocol 2 only.",
    )
    group.addoption(
        "--lembas-specs",
        metavar="LIST",
        default=None,
        help="... and once per harness spec in LIST (1.0.0,1.1.0). Default: 1.1.0 only.",
    )
    group.addoption(
        "--lembas-timeout",
        metavar="SECONDS",
        type=float,
        default=120.0,
        help="how long a scenario may still run after the test body before it counts as "
        "failed (default 120).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "lembas(scenario=None, *, protocol=None, spec=None, hooks=None, exec=None, arranged=(), "
        "strict=False, args=(), token=None, timeout=None): how the test's fake_instance and "
        "fake_device run (a scenario name such as negotiate.yaml or a file; a fixed cell; hooks; "
        "the system under test's command; extra arguments).",
    )
    config.pluginmanager.register(_JunitMerge(), "lembas-doubles-junit")
    # A mistyped cell list is a usage error before anything is collected.
    _parse_list(config, "lembas_protocols", _PROTOCOLS, int)
    _parse_list(config, "lembas_specs", _SPECS, str)


def _parse_list(config: pytest.Config, option: str, allowed: tuple, convert: Any) -> list | None:
    raw = config.getoption(option)
    if not raw:
        return None
    try:
        values = [convert(v.strip()) for v in raw.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v not in allowed for v in values):
        raise pytest.UsageError(
            f"--{option.replace('_', '-')} {raw}: say a comma-separated list of "
            f"{', '.join(map(str, allowed))}"
        )
    return values


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test that uses a double (so `lembas_protocol` is in its fixture closure) runs once per
    # cell asked for; a marker that fixes the protocol or spec keeps its own.
    marker = metafunc.definition.get_closest_marker("lembas")
    fixed = marker.kwargs if marker else {}
    protocols = _parse_list(metafunc.config, "lembas_protocols", _PROTOCOLS, int)
    if protocols and "lembas_protocol" in metafunc.fixturenames and "protocol" not in fixed:
        metafunc.parametrize("lembas_protocol", protocols, ids=[f"protocol-{p}" for p in protocols])
    specs = _parse_list(metafunc.config, "lembas_specs", _SPECS, str)
    if specs and "lembas_spec" in metafunc.fixturenames and "spec" not in fixed:
        metafunc.parametrize("lembas_spec", specs, ids=[f"spec-{s}" for s in specs])


@dataclass
class _Config:
    """What one double of a test runs: the marker's keywords, overridden by indirect params."""

    scenario: str | None = None
    exec: str | None = None
    arranged: tuple = ()
    strict: bool = False
    args: tuple = ()
    token: str | None = None
    timeout: float | None = None
    hooks: Any = None
    protocol: int | None = None
    spec: str | None = None


def _config(request: pytest.FixtureRequest) -> _Config:
    config = _Config()
    marker = request.node.get_closest_marker("lembas")
    if marker is not None:
        unknown = set(marker.kwargs) - _MARKER_KEYS
        if unknown:
            pytest.fail(
                f"@pytest.mark.lembas: unknown keyword(s) {', '.join(sorted(unknown))}",
                pytrace=False,
            )
        if marker.args:
            config.scenario = marker.args[0]
        for key, value in marker.kwargs.items():
            setattr(config, key, tuple(value) if key in ("arranged", "args") else value)
    # `@pytest.mark.parametrize("fake_device", ["negotiate.yaml", {...}], indirect=True)`.
    param = getattr(request, "param", None)
    if isinstance(param, str):
        config.scenario = param
    elif isinstance(param, dict):
        for key, value in param.items():
            if key not in _MARKER_KEYS:
                pytest.fail(f"{request.fixturename} param: unknown key {key!r}", pytrace=False)
            setattr(config, key, tuple(value) if key in ("arranged", "args") else value)
    return config


@pytest.fixture
def lembas_protocol(request: pytest.FixtureRequest) -> int:
    """The link protocol of the test's cell (``--lembas-protocols`` parametrizes it)."""
    marker = request.node.get_closest_marker("lembas")
    return int(marker.kwargs.get("protocol", DEFAULT_PROTOCOL)) if marker else DEFAULT_PROTOCOL


@pytest.fixture
def lembas_spec(request: pytest.FixtureRequest) -> str:
    """The harness spec of the test's cell (``--lembas-specs`` parametrizes it)."""
    marker = request.node.get_closest_marker("lembas")
    return str(marker.kwargs.get("spec", DEFAULT_SPEC)) if marker else DEFAULT_SPEC


@pytest.fixture
def lembas_hooks(request: pytest.FixtureRequest) -> Any:
    """The hooks the doubles get: override it in a conftest.py to map the scenario's set-up to
    your own code (``{"open_chat": lambda fields: client.post(...).json()}``), using any other
    fixture. Default: the marker's ``hooks``, else none (a scenario that needs one is then not
    applicable, which skips the test)."""
    marker = request.node.get_closest_marker("lembas")
    return marker.kwargs.get("hooks") if marker else None


@pytest.fixture
def lembas_instance_url() -> str | None:
    """The base URL of the web server under test, which fake_device dials. Override it in a
    conftest.py (``return live_server.url``); or start the server from the double with the
    marker's ``exec`` (its command, with ``{port}``)."""
    return None


@dataclass
class _Runs:
    """The doubles a test started, judged once its body has run."""

    item: pytest.Item
    doubles: list[Double] = field(default_factory=list)
    timeouts: dict[int, float] = field(default_factory=dict)
    strict: dict[int, bool] = field(default_factory=dict)


class LembasDoubles:
    """The ``lembas_doubles`` fixture: start any number of doubles in one test.

    Each is judged like the ``fake_instance`` and ``fake_device`` fixtures' (after the test
    body, unless the test took its verdict), and stopped at teardown."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path):
        self._request = request
        self._tmp_path = tmp_path
        self._count = 0
        runs = request.node.stash.get(_runs_key, None)
        if runs is None:
            runs = _Runs(request.node)
            request.node.stash[_runs_key] = runs
        self._runs = runs

    def _workdir(self, name: str) -> Path:
        self._count += 1
        return self._tmp_path / f"{name}-{self._count}"

    def _register(self, double: Double, timeout: float | None, strict: bool) -> Double:
        self._runs.doubles.append(double)
        self._runs.timeouts[id(double)] = timeout or self._request.config.getoption(
            "lembas_timeout"
        )
        self._runs.strict[id(double)] = strict
        return double

    def fake_instance(
        self, scenario: str | None = None, *, timeout: float | None = None, **options: Any
    ) -> Double:
        """`lembas_doubles.start_fake_instance`, judged and stopped with the test."""
        double = _started(
            start_fake_instance, scenario, workdir=self._workdir("fake-instance"), **options
        )
        return self._register(double, timeout, bool(options.get("strict")))

    def fake_device(
        self,
        instance: str | None = None,
        scenario: str | None = None,
        *,
        timeout: float | None = None,
        **options: Any,
    ) -> Double:
        """`lembas_doubles.start_fake_device`, judged and stopped with the test."""
        double = _started(
            start_fake_device, instance, scenario, workdir=self._workdir("fake-device"), **options
        )
        return self._register(double, timeout, bool(options.get("strict")))


def _started(start: Any, *args: Any, **options: Any) -> Double:
    # A double that cannot start (no binary, a scenario that does not load) is the test's
    # set-up failing: an error with the double's own message, not a pytest traceback into here.
    try:
        return start(*args, **options)
    except LembasError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def lembas_doubles(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LembasDoubles]:
    """Starts doubles in a test (several, or with options only known inside the test)."""
    doubles = LembasDoubles(request, tmp_path)
    yield doubles
    _finish(request.node)


def _options(config: _Config, protocol: int, spec: str, hooks: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "protocol": int(config.protocol or protocol),
        "spec": str(config.spec or spec),
        "hooks": config.hooks if config.hooks is not None else hooks,
        "exec": config.exec,
        "arranged": config.arranged,
        "strict": config.strict,
        "args": config.args,
    }
    if config.token:
        options["token"] = config.token
    return options


@pytest.fixture
def fake_instance(
    request: pytest.FixtureRequest,
    lembas_doubles: LembasDoubles,
    lembas_protocol: int,
    lembas_spec: str,
    lembas_hooks: Any,
) -> Double:
    """fake-instance, playing LLeMbas for the CLI under test: ``.url`` and ``.token`` to point
    the CLI at, ``.act()``, ``.journal()``, ``.wait_for()`` and ``.state()`` over its control
    API. The scenario, cell and hooks come from ``@pytest.mark.lembas``, an indirect param, and
    the ``lembas_protocol``, ``lembas_spec`` and ``lembas_hooks`` fixtures."""
    config = _config(request)
    return lembas_doubles.fake_instance(
        config.scenario,
        timeout=config.timeout,
        **_options(config, lembas_protocol, lembas_spec, lembas_hooks),
    )


@pytest.fixture
def fake_device(
    request: pytest.FixtureRequest,
    lembas_instance_url: str | None,
    lembas_doubles: LembasDoubles,
    lembas_protocol: int,
    lembas_spec: str,
    lembas_hooks: Any,
) -> Double:
    """fake-device, playing the LLeMbas CLI against the web server under test (at
    ``lembas_instance_url``, or started by the marker's ``exec``): ``.url`` and ``.token`` it
    dials with, ``.act()``, ``.journal()``, ``.wait_for()`` and ``.state()`` over its control
    API. Configured as ``fake_instance`` is.

    ``lembas_instance_url`` comes first in its arguments, so the server under test is set up
    before the double and torn down after it."""
    config = _config(request)
    if lembas_instance_url is None and config.exec is None:
        pytest.fail(
            "fake_device needs the web server under test: override the `lembas_instance_url` "
            "fixture in a conftest.py, or give @pytest.mark.lembas(exec='... {port} ...')",
            pytrace=False,
        )
    return lembas_doubles.fake_device(
        lembas_instance_url,
        config.scenario,
        timeout=config.timeout,
        **_options(config, lembas_protocol, lembas_spec, lembas_hooks),
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # The test body first; when it raised, that failure is the test's and the doubles are only
    # stopped at teardown. When it returned, the doubles it started have the last word.
    result = yield
    runs = item.stash.get(_runs_key, None)
    if runs is not None:
        _judge(runs)
    return result


def _judge(runs: _Runs) -> None:
    failed: list[Verdict] = []
    skipped: list[Verdict] = []
    for double in runs.doubles:
        if double.verdict_taken:
            continue
        verdict = double.await_verdict(timeout=runs.timeouts[id(double)])
        runs.item.add_report_section("call", f"{double.name} report", verdict.report)
        if verdict.verdict == "passed":
            continue
        if verdict.verdict == "not_applicable" and not runs.strict[id(double)]:
            skipped.append(verdict)
        else:
            failed.append(verdict)
    if failed:
        pytest.fail("\n\n".join(_headline(v) + "\n" + v.report for v in failed), pytrace=False)
    if skipped:
        reason = "; ".join(f"{v.double}: not applicable: {v.why}" for v in skipped)
        # Reported at the test's own location (as a skipif mark's skip is), not at this line.
        try:
            raise pytest.skip.Exception(reason, _use_item_location=True)
        except TypeError:  # a pytest without that keyword
            pytest.skip(reason)


def _headline(verdict: Verdict) -> str:
    rules = f" (broke {', '.join(verdict.broken_rules)})" if verdict.broken_rules else ""
    return f"{verdict.double}: {verdict.verdict}{rules}"


def _finish(item: pytest.Item) -> None:
    """Teardown: stops what still runs and puts each double's verdict and JUnit in the report."""
    runs = item.stash.get(_runs_key, None)
    if runs is None:
        return
    for index, double in enumerate(runs.doubles, 1):
        verdict = double.stop()
        prefix = f"lembas.{double.name}" + (f".{index}" if len(runs.doubles) > 1 else "")
        item.user_properties.append((f"{prefix}.verdict", verdict.verdict))
        item.user_properties.append(
            (f"{prefix}.cell", f"protocol {double.protocol} · spec {double.spec}")
        )
        if double.scenario:
            item.user_properties.append((f"{prefix}.scenario", double.scenario))
        if verdict.broken_rules:
            item.user_properties.append((f"{prefix}.broken_rules", ",".join(verdict.broken_rules)))
        if verdict.junit is not None:
            # The path travels in the report (also from pytest-xdist's workers) to the end of
            # the session, where the suite is added to pytest's own JUnit file.
            item.user_properties.append((f"{prefix}.junit", str(double.report_paths["junit"])))
    runs.doubles.clear()


class _JunitMerge:
    """Puts each double's JUnit into pytest's own ``--junitxml`` file, beside pytest's suite.

    The files' paths come with the test reports (so also from pytest-xdist's workers); once
    pytest's junitxml plugin has written its file, each double's <testsuite> is appended, named
    after the test that ran it, so CI shows the double's steps too."""

    def __init__(self) -> None:
        self.collected: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name.startswith("lembas.") and name.endswith(".junit"):
                self.collected.append((report.nodeid, str(value)))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # trylast: after pytest's junitxml plugin wrote the file.
        xmlpath = getattr(session.config.option, "xmlpath", None)
        if not xmlpath or not self.collected or not os.path.exists(xmlpath):
            return
        tree = ET.parse(xmlpath)
        root = tree.getroot()
        for nodeid, path in self.collected:
            try:
                theirs = ET.parse(path).getroot()
            except (OSError, ET.ParseError):
                continue
            suites = [theirs] if theirs.tag == "testsuite" else theirs.findall("testsuite")
            for suite in suites:
                double = theirs.get("name", "double")
                suite.set("name", f"{nodeid} › {double} · {suite.get('name', '')}")
                properties = suite.find("properties")
                if properties is None:
                    properties = ET.Element("properties")
                    suite.insert(0, properties)
                ET.SubElement(properties, "property", name="pytest.nodeid", value=nodeid)
                root.append(suite)
        tree.write(xmlpath, encoding="utf-8", xml_declaration=True)
