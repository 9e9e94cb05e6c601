"""Compatibility module: the ordering stage lives in ``dblog.ordering`` (one module per step)."""

from .ordering import *  # noqa: F401,F403
from .ordering import __all__  # noqa: F401
