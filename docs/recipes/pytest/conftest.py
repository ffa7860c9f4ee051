# The fixture, for the tests in this folder (a project puts it in its own conftest.py).
from lembas_doubles import fake_device  # noqa: F401
