"""The one error type for a setting promptprism cannot start with.

The collector (``PROMPTPRISM_*`` variables and flags) and the exporter
(``OTEL_EXPORTER_OTLP_*`` variables and ``configure()`` arguments) both raise
it, so an application or a deployment script catches one type whichever part
it configures. It lives here, in the standard-library-only package both
import, because neither may import the other.
"""

from __future__ import annotations


class ConfigurationError(ValueError):
    """A setting has a value promptprism cannot use.

    The message names the setting (variable, flag or argument) and says what
    was expected; it is raised when the setting is read at start-up, not later.
    """
