"""The LLeMbas link doubles, for Python tests.

The wheel puts the ``fake-instance``, ``fake-device`` and ``harness`` commands on the virtual
environment's PATH; this package starts them from Python (`start_fake_instance`,
`start_fake_device`) and drives a running one over its control API (`Double`). The pytest
plugin (`lembas_doubles.plugin`, loaded automatically) builds the ``fake_instance`` and
``fake_device`` fixtures on it.
"""

from importlib.metadata import PackageNotFoundError, version

from ._doubles import (
    DEFAULT_PROTOCOL,
    DEFAULT_SPEC,
    DEFAULT_TOKEN,
    ControlError,
    Double,
    LembasError,
    Verdict,
    binary,
    start_fake_device,
    start_fake_instance,
)
from ._hooks import Hook, Hooks

try:
    __version__ = version("lembas-doubles")
except PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT_PROTOCOL",
    "DEFAULT_SPEC",
    "DEFAULT_TOKEN",
    "ControlError",
    "Double",
    "Hook",
    "Hooks",
    "LembasError",
    "Verdict",
    "binary",
    "start_fake_device",
    "start_fake_instance",
]
