"""A double as a process: start it, drive it over its control API, take its verdict.

The doubles are command-line programs; this module is the thin layer a Python test needs
around one run: it finds the binary installed with this package, starts it with the control API
(``--control``) on a token chosen here, reads the ready lines it prints, keeps its reports and
journal in a directory of the run's own, and turns its exit and JSON report into a `Verdict`.
Nothing here needs pytest: `lembas_doubles.plugin` builds the fixtures on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ._hooks import Hooks, HookServer, write_hooks

DEFAULT_TOKEN = "lembas-test-token"
"""The device token fake-instance accepts and fake-device says when none is given."""

DEFAULT_SPEC = "1.1.0"
DEFAULT_PROTOCOL = 2

#: The doubles' exit code for a scenario run stopped before its verdict (never a pass).
EXIT_INTERRUPTED = 6

_BINARIES = ("fake-instance", "fake-device", "harness")


class LembasError(Exception):
    """A double could not be found or started (not a verdict on the peer)."""


class ControlError(LembasError):
    """The control API refused a request; ``error`` says why."""

    def __init__(self, status: int, error: str, body: Any = None):
        super().__init__(f"control API: {status}: {error}")
        self.status = status
        self.error = error
        self.body = body

    @property
    def not_applicable(self) -> bool:
        """The action needs what the peer never claimed (a capability it did not list)."""
        return bool(isinstance(self.body, dict) and self.body.get("not_applicable"))


def binary(name: str) -> str:
    """The path of ``fake-instance``, ``fake-device`` or ``harness``.

    In order: the environment variable ``LEMBAS_FAKE_INSTANCE`` (``LEMBAS_FAKE_DEVICE``,
    ``LEMBAS_HARNESS``), to test a build of one's own; the scripts directory of this Python (where
    the wheel put it, even when the virtual environment is not activated); then ``PATH``.
    """
    if name not in _BINARIES:
        raise ValueError(f"{name!r} is not one of {', '.join(_BINARIES)}")
    override = os.environ.get("LEMBAS_" + name.upper().replace("-", "_"))
    if override:
        return override
    exe = name + (".exe" if sys.platform == "win32" else "")
    for scripts in _scripts_dirs():
        candidate = Path(scripts) / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise LembasError(
        f"no `{name}` found: install the wheel into this environment (pip install lembas-doubles), "
        f"put `{name}` on PATH, or name it in LEMBAS_{name.upper().replace('-', '_')}"
    )


def _scripts_dirs() -> Iterator[str]:
    yield sysconfig.get_path("scripts")
    # `pip install --user` puts scripts in the user scheme's directory instead.
    try:
        user_scheme = sysconfig.get_preferred_scheme("user")  # Python 3.10+
    except AttributeError:
        user_scheme = f"{os.name}_user"
    try:
        yield sysconfig.get_path("scripts", user_scheme)
    except KeyError:
        return


@dataclass
class Verdict:
    """What a double said of its peer: the verdict, the rules broken and the reports."""

    double: str
    exit_code: int
    verdict: str
    """``passed``, ``not_applicable``, ``failed``, ``scenario_error``, or, without a JSON report,
    ``interrupted`` (stopped before its verdict) or ``error`` (the double itself failed)."""
    why: str | None
    """Why the scenario did not apply (for ``not_applicable``), or what went wrong."""
    broken_rules: list[str]
    report: str
    """The human report the double printed (steps, the rule broken, the diff, last messages),
    followed by what it wrote on stderr."""
    junit: str | None = None
    """The double's JUnit XML (a run with a scenario)."""
    findings: list[dict] = field(default_factory=list)
    outcome: dict = field(default_factory=dict)
    strict: bool = False
    """Whether the run was strict (``strict=True``, ``--strict``): then a scenario that did not
    apply fails like a failure, here as in the double's exit code."""

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    @property
    def not_applicable(self) -> bool:
        return self.verdict == "not_applicable"

    def assert_passed(
        self, *, strict: bool | None = None, allow_not_applicable: bool | None = None
    ) -> None:
        """Fails (AssertionError) with the double's report unless the peer passed.

        "Not applicable" means one thing everywhere: the scenario needs what the peer never
        claimed, so the peer was not judged, and that is no failure. The commands exit 0, the
        pytest plugin skips the test, and so does this under pytest (elsewhere it returns).
        ``strict`` is the one switch that makes it a failure; it defaults to the run's own
        (``strict=True`` when the double was started). ``allow_not_applicable=False`` is the old
        spelling of ``strict=True``.
        """
        if strict is None and allow_not_applicable is not None:
            strict = not allow_not_applicable
        strict = self.strict if strict is None else strict
        if self.verdict == "not_applicable" and not strict:
            pytest = sys.modules.get("pytest")
            if pytest is not None:
                pytest.skip(f"{self.double}: not applicable: {self.why}")
            return
        assert self.verdict == "passed", f"{self.double}: {self.verdict}\n{self.report}"

    def assert_failed_on(self, rule: str) -> None:
        """Fails unless the peer was caught breaking ``rule``."""
        assert self.verdict == "failed" and rule in self.broken_rules, (
            f"{self.double}: expected a failure on {rule}, got {self.verdict} "
            f"{self.broken_rules}\n{self.report}"
        )


class Double:
    """One run of a double: its URLs and token, its control API, and its verdict.

    Made by `start_fake_instance` and `start_fake_device` (or the pytest fixtures). Use it as a
    context manager, or call `verdict` (a run with a scenario) or `stop`.
    """

    def __init__(
        self,
        name: str,
        command: list[str],
        *,
        workdir: Path,
        token: str,
        protocol: int,
        spec: str,
        scenario: str | None,
        url: str | None,
        root: Path | None,
        hook_server: HookServer | None,
        env: dict[str, str] | None,
        ready_timeout: float,
    ):
        self.name = name
        self.command = command
        self.workdir = workdir
        self.token = token
        """The device token: the one fake-instance accepts, or the one fake-device says."""
        self.protocol = protocol
        self.spec = spec
        self.scenario = scenario
        self.url = url
        """fake-instance: its own URL (``http://127.0.0.1:PORT``), for the CLI under test to
        log in to. fake-device: the instance it dials (the server under test)."""
        self.root = root
        """fake-device: the directory it offers as its remote root."""
        self.control_url: str | None = None
        self.control_token = secrets.token_hex(16)
        self.journal_path = workdir / "journal.jsonl"
        self.report_paths = {"json": workdir / "report.json", "junit": workdir / "report.xml"}
        self._hook_server = hook_server
        self._verdict: Verdict | None = None
        self.verdict_taken = False
        """Whether the test took the verdict itself (`verdict`), so nothing else judges it."""
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._lines = threading.Condition()
        # The control token goes in the environment, not in argv, where `ps` would show it.
        child_env = {
            **os.environ,
            **(env or {}),
            "NO_COLOR": "1",
            "LEMBAS_CONTROL_TOKEN": self.control_token,
        }
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                env=child_env,
                # No `cwd`: the double runs in the test's working directory, so relative
                # scenario and hooks paths mean what they say in the test.
            )
        except OSError as e:
            self._close_hooks()
            raise LembasError(f"cannot start {name} ({command[0]}): {e}") from e
        self._readers = [
            threading.Thread(
                target=self._read,
                args=(self.process.stdout, self._stdout),
                name=f"{name}-stdout",
                daemon=True,
            ),
            threading.Thread(
                target=self._read,
                args=(self.process.stderr, self._stderr),
                name=f"{name}-stderr",
                daemon=True,
            ),
        ]
        for reader in self._readers:
            reader.start()
        try:
            self._await_ready(ready_timeout)
        except BaseException:
            self._kill()
            raise

    # -- start-up ------------------------------------------------------------------------------

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self._lines:
                into.append(line.rstrip("\n"))
                self._lines.notify_all()
        with self._lines:
            self._lines.notify_all()

    def _await_ready(self, timeout: float) -> None:
        # fake-instance prints `listening URL` once it accepts connections; both print
        # `control URL token=TOKEN` once the control API is up. Those lines are the ready signal.
        deadline = time.monotonic() + timeout
        while True:
            with self._lines:
                if self._scan_ready():
                    return
            if self.process.poll() is not None:
                # A quick scenario may be over already: what it printed before it ended counts.
                self._drain()
                with self._lines:
                    if self._scan_ready():
                        return
                raise LembasError(
                    f"{self.name} ended (exit {self.process.returncode}) before it was ready:\n"
                    f"{self.output()}\ncommand: {' '.join(self.command)}"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise LembasError(
                    f"{self.name} was not ready within {timeout:g}s:\n{self.output()}"
                )
            with self._lines:
                self._lines.wait(min(left, 0.5))

    def _scan_ready(self) -> bool:
        need_listening = self.name == "fake-instance"
        for line in self._stdout:
            if line.startswith("listening ") and need_listening and self.url is None:
                self.url = line.split(" ", 1)[1].strip()
            elif line.startswith("control ") and self.control_url is None:
                self.control_url = line.split()[1]
        return bool(self.control_url and (self.url or not need_listening))

    def output(self) -> str:
        """What the double printed so far: its stdout (the report), then its stderr."""
        with self._lines:
            out = [line for line in self._stdout if not line.startswith(("listening ", "control "))]
            err = list(self._stderr)
        text = "\n".join(out)
        if err:
            text += ("\n" if text else "") + "\n".join(err)
        if self._hook_server and self._hook_server.errors:
            text += "\nhooks raised:\n" + "\n".join(self._hook_server.errors)
        return text

    # -- the control API -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def _request(self, method: str, path: str, body: Any = None, timeout: float = 40.0) -> Any:
        if self.control_url is None:
            raise LembasError(f"{self.name} has no control API")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.control_url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.control_token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                said = json.loads(raw)
            except ValueError:
                said = {"error": raw.decode(errors="replace")}
            raise ControlError(e.code, said.get("error", ""), said) from None
        except urllib.error.URLError as e:
            # Refused while the run ends (its control API closes just before the process
            # exits): give the exit a moment, so callers can tell "ended" from "did not answer".
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=2)
            state = "ended" if not self.running else "did not answer"
            raise LembasError(f"{self.name}'s control API {state}: {e.reason}") from None
        return json.loads(raw) if raw else None

    def state(self) -> dict:
        """``GET /v1/state``: the cell, scenario step, links, findings, the double's own state."""
        return self._request("GET", "/v1/state")

    def journal(self, after: int = 0, wait_ms: int = 0, limit: int | None = None) -> dict:
        """``GET /v1/journal``: ``{"entries": [...], "last": N}``, the messages after ``after``.

        Once the double has ended its control API is gone, so the page is read from its
        ``--journal`` file instead, with the same entries."""
        if not self.running:
            entries = [e for e in self._journal_file() if e["seq"] > after][: limit or 50]
            last = entries[-1]["seq"] if entries else after
            return {"entries": entries, "last": last}
        query = {"after": after, "wait_ms": wait_ms}
        if limit:
            query["limit"] = limit
        try:
            return self._request(
                "GET", "/v1/journal?" + urllib.parse.urlencode(query), timeout=wait_ms / 1000 + 10
            )
        except LembasError:
            if self.running:
                raise
            return self.journal(after, 0, limit)  # it ended while we asked

    def _journal_file(self) -> list[dict]:
        if not self.journal_path.exists():
            return []
        return [json.loads(line) for line in self.journal_path.read_text().splitlines() if line]

    def entries(self, after: int = 0) -> list[dict]:
        """Every journal entry after ``after`` so far, oldest first."""
        found: list[dict] = []
        while True:
            page = self.journal(after=after)
            found += page["entries"]
            if not page["entries"] or page["last"] <= after:
                return found
            after = page["last"]

    def wait_for(
        self,
        method: str | None = None,
        *,
        where: Callable[[dict], bool] | None = None,
        direction: str | None = None,
        after: int = 0,
        timeout: float = 10.0,
    ) -> dict:
        """The first journal entry after ``after`` whose message has this ``method`` (and
        ``direction``: ``in``, ``out``, ``event``), for which ``where(entry)`` holds; waits (long
        polls) up to ``timeout`` seconds for it. Raises TimeoutError naming what came instead."""
        deadline = time.monotonic() + timeout
        seen: list[dict] = []
        while True:
            left = deadline - time.monotonic()
            page = self.journal(after=after, wait_ms=max(0, int(min(left, 5) * 1000)))
            for entry in page["entries"]:
                seen.append(entry)
                msg = entry.get("msg") or {}
                if method is not None and not (
                    isinstance(msg, dict) and msg.get("method") == method
                ):
                    continue
                if direction is not None and entry.get("dir") != direction:
                    continue
                if where is not None and not where(entry):
                    continue
                return entry
            after = max(after, page["last"])
            if time.monotonic() >= deadline or (not self.running and not page["entries"]):
                tail = "\n".join(json.dumps(e.get("msg"))[:200] for e in seen[-10:])
                raise TimeoutError(
                    f"{self.name}: no {method or 'entry'} in the journal within {timeout:g}s; "
                    f"the last ones:\n{tail or '(none)'}"
                )

    def act(self, action: dict, within_ms: int | None = None) -> Any:
        """``POST /v1/act``: one action of the double's own side, as a scenario's ``act`` writes
        it (``{"open_chat": {}}``); gives its result. A ControlError says why it could not."""
        path = "/v1/act" + (f"?within_ms={within_ms}" if within_ms is not None else "")
        timeout = (within_ms or 10_000) / 1000 + 30
        return self._request("POST", path, action, timeout=timeout)["result"]

    def inject(
        self, *, text: str | None = None, message: Any = None, link: int | None = None
    ) -> int:
        """``POST /v1/inject``: a raw message on a link (malformed ``text`` too); gives the link."""
        body: dict[str, Any] = {}
        if text is not None:
            body["text"] = text
        if message is not None:
            body["message"] = message
        if link is not None:
            body["link"] = link
        return self._request("POST", "/v1/inject", body)["link"]

    def signal(self, name: str) -> None:
        """``POST /v1/signals/NAME``: raises the signal a ``wait_for_signal`` step waits on."""
        self._request("POST", "/v1/signals/" + urllib.parse.quote(name, safe=""), {})

    # -- the verdict ---------------------------------------------------------------------------

    def verdict(self, timeout: float | None = 120.0) -> Verdict:
        """Waits for the scenario to end and gives the verdict (the double exits with it).

        A run without a scenario never ends by itself: it is stopped, and its verdict is what
        its monitors found. Taking the verdict here means nothing else judges it (the pytest
        plugin leaves it to the test)."""
        self.verdict_taken = True
        return self.await_verdict(timeout)

    def await_verdict(self, timeout: float | None = 120.0) -> Verdict:
        """`verdict`, without taking it: what a harness around the test (the pytest plugin)
        uses to judge a double the test left alone."""
        if self._verdict is None:
            if self.scenario is None:
                return self.stop()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._terminate()
                self._verdict = self._read_verdict(why=f"no verdict within {timeout:g}s: stopped")
            else:
                self._verdict = self._read_verdict()
            self._close_hooks()
        return self._verdict

    def stop(self, grace: float = 10.0) -> Verdict:
        """Ends the run now and gives its verdict.

        A scenario still running is stopped before its verdict (``interrupted``, never a pass).
        A run without a scenario is judged on its monitors' findings, read from the control API
        before it stops (the command itself prints them on stderr and exits 0)."""
        if self._verdict is not None:
            return self._verdict
        findings: list[dict] = []
        if self.scenario is None and self.running:
            try:
                findings = self.state().get("findings", [])
            except LembasError:
                findings = []
        if self.running:
            self._terminate(grace)
        if self.scenario is None:
            self._verdict = self._simulated_verdict(findings)
        else:
            self._verdict = self._read_verdict()
        self._close_hooks()
        return self._verdict

    def _terminate(self, grace: float = 10.0) -> None:
        # SIGTERM lets the double end what it started (`--exec`'s process group) and print
        # what it has; SIGKILL only if it does not exit in time.
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._kill()

    def _kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_hooks()

    def _close_hooks(self) -> None:
        # Once the double has ended nothing calls its hooks; the errors stay for the report.
        if self._hook_server is not None and not self._hook_server.closed:
            self._hook_server.close()

    def _drain(self) -> None:
        # The readers end at EOF, right after the process; wait so the report is complete.
        for reader in self._readers:
            reader.join(timeout=5)

    def _read_verdict(self, why: str | None = None) -> Verdict:
        self._drain()
        code = self.process.returncode if self.process.returncode is not None else -1
        text = self.output()
        junit_path = self.report_paths["junit"]
        junit = junit_path.read_text() if junit_path.exists() else None
        json_path = self.report_paths["json"]
        if not json_path.exists():
            # No report: stopped before a verdict (exit 6), or the double failed (exit 3).
            verdict = "interrupted" if code in (EXIT_INTERRUPTED, -signal.SIGTERM) else "error"
            return Verdict(
                self.name,
                code,
                verdict,
                why or f"{self.name} exited {code} without a verdict",
                [],
                text,
                junit,
            )
        written = json.loads(json_path.read_text())
        outcome = written.get("outcome", {})
        return Verdict(
            double=self.name,
            exit_code=code,
            verdict=written["verdict"],
            why=outcome.get("not_applicable") or why,
            broken_rules=[rule["id"] for rule in written.get("broken_rules", [])],
            report=text,
            junit=junit,
            findings=outcome.get("findings", []),
            outcome=outcome,
            strict="--strict" in self.command,
        )

    def _simulated_verdict(self, findings: list[dict]) -> Verdict:
        self._drain()
        code = self.process.returncode if self.process.returncode is not None else -1
        rules = sorted({f["rule"] for f in findings})
        text = self.output()
        if findings:
            said = "\n".join(
                f"  rule {f['rule']}: {f['summary']}"
                + (f"\n    {f['detail']}" if f.get("detail") else "")
                for f in findings
            )
            text = f"{self.name} (no scenario): the peer broke {', '.join(rules)}\n{said}\n{text}"
        verdict = "failed" if findings else ("passed" if code in (0, -signal.SIGTERM) else "error")
        return Verdict(self.name, code, verdict, None, rules, text, None, findings)

    # -- context manager -----------------------------------------------------------------------

    def __enter__(self) -> Double:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"<{self.name} scenario={self.scenario!r} protocol={self.protocol} "
            f"spec={self.spec} url={self.url!r}>"
        )


def _common_args(
    *,
    scenario: str | None,
    spec: str,
    hooks_file: Path | None,
    arranged: Iterable[str],
    strict: bool,
    exec: str | None,
    workdir: Path,
) -> list[str]:
    args = ["--spec", spec, "--control", "--journal", str(workdir / "journal.jsonl")]
    if scenario is not None:
        args += [
            "--scenario",
            scenario,
            "--report",
            f"json:{workdir / 'report.json'}",
            "--report",
            f"junit:{workdir / 'report.xml'}",
        ]
    if hooks_file is not None:
        args += ["--hooks", str(hooks_file)]
    arranged = list(arranged)
    if arranged:
        args += ["--arranged", ",".join(arranged)]
    if strict:
        args.append("--strict")
    if exec is not None:
        args += ["--exec", exec]
    return args


def _workdir(workdir: str | os.PathLike[str] | None, name: str) -> Path:
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix=f"lembas-{name}-"))
    path = Path(workdir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _scenario_name(scenario: str | os.PathLike[str] | None, side: str) -> str | None:
    if scenario is None:
        return None
    # `device/negotiate.yaml` and `negotiate.yaml` name the same embedded scenario; the double
    # takes the bare name (or a path to a file of one's own).
    text = os.fspath(scenario)
    prefix = f"{side}/"
    if text.startswith(prefix) and not Path(text).exists():
        return text[len(prefix) :]
    return text


def start_fake_instance(
    scenario: str | os.PathLike[str] | None = None,
    *,
    protocol: int = DEFAULT_PROTOCOL,
    spec: str = DEFAULT_SPEC,
    token: str = DEFAULT_TOKEN,
    hooks: Hooks | None = None,
    exec: str | None = None,
    arranged: Sequence[str] = (),
    strict: bool = False,
    args: Sequence[str] = (),
    workdir: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    ready_timeout: float = 30.0,
) -> Double:
    """Starts fake-instance (playing LLeMbas, the web server) for a CLI under test.

    Returns once it listens: point the CLI at ``.url`` with ``.token``, or give ``exec`` (the
    CLI's command, with ``{url}``, ``{token}``, ``{root}``, ``{tmp}``... in it) to have the double
    start it. ``protocol`` 1 serves discovery with ``[1]``, 2 with ``[1, 2]``. Without a scenario
    it is a simulated instance, driven with `Double.act`."""
    workdir = _workdir(workdir, "fake-instance")
    hooks_file, server = write_hooks(hooks, workdir / "hooks.yaml") if hooks else (None, None)
    command = [
        binary("fake-instance"),
        "--protocol",
        str(protocol),
        "--token",
        token,
        *_common_args(
            scenario=_scenario_name(scenario, "instance"),
            spec=spec,
            hooks_file=hooks_file,
            arranged=arranged,
            strict=strict,
            exec=exec,
            workdir=workdir,
        ),
        *args,
    ]
    return Double(
        "fake-instance",
        command,
        workdir=workdir,
        token=token,
        protocol=protocol,
        spec=spec,
        scenario=_scenario_name(scenario, "instance"),
        url=None,
        root=None,
        hook_server=server,
        env=env,
        ready_timeout=ready_timeout,
    )


def start_fake_device(
    instance: str | None = None,
    scenario: str | os.PathLike[str] | None = None,
    *,
    protocol: int = DEFAULT_PROTOCOL,
    spec: str = DEFAULT_SPEC,
    token: str = DEFAULT_TOKEN,
    hooks: Hooks | None = None,
    exec: str | None = None,
    root: str | os.PathLike[str] | None = None,
    arranged: Sequence[str] = (),
    strict: bool = False,
    args: Sequence[str] = (),
    workdir: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    ready_timeout: float = 30.0,
) -> Double:
    """Starts fake-device (playing the LLeMbas CLI) against the web server under test.

    ``instance`` is the server's base URL; or give ``exec`` (its command, with ``{port}``) to have
    the double start it. The device says ``protocol`` (the cell: a protocol-1 cell is a server
    whose discovery lists only 1) and offers ``root`` (default: a fresh directory) as its remote
    root. Without a scenario it is a simulated device, driven with `Double.act`."""
    if instance is None and exec is None:
        raise LembasError(
            "fake-device needs the server under test: give `instance` (its URL) "
            "or `exec` (its command, with {port})"
        )
    workdir = _workdir(workdir, "fake-device")
    root_dir = Path(root) if root is not None else workdir / "root"
    root_dir.mkdir(parents=True, exist_ok=True)
    hooks_file, server = write_hooks(hooks, workdir / "hooks.yaml") if hooks else (None, None)
    command = [
        binary("fake-device"),
        "--protocol",
        str(protocol),
        "--token",
        token,
        "--root",
        str(root_dir),
        "--state-dir",
        str(workdir / "state"),
        *(["--instance", instance] if instance else []),
        *_common_args(
            scenario=_scenario_name(scenario, "device"),
            spec=spec,
            hooks_file=hooks_file,
            arranged=arranged,
            strict=strict,
            exec=exec,
            workdir=workdir,
        ),
        *args,
    ]
    return Double(
        "fake-device",
        command,
        workdir=workdir,
        token=token,
        protocol=protocol,
        spec=spec,
        scenario=_scenario_name(scenario, "device"),
        url=instance,
        root=root_dir,
        hook_server=server,
        env=env,
        ready_timeout=ready_timeout,
    )
