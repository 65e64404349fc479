"""Errors a user can cause: the CLI prints their message in one line and exits non-zero."""

import difflib


def did_you_mean(value, allowed) -> str:
    """' (did you mean 'x'?)' naming the closest of ``allowed`` to ``value`` (difflib's), or '' where none is close:
    the hint every one-line error about an unknown name carries."""
    near = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


class UserError(Exception):
    """Bad input (config, spec, data file, path, address): the message says what is wrong and what is allowed."""

    exit_code = 2


class ConfigError(UserError, ValueError):
    """A configuration value is invalid."""


class DataError(UserError):
    """A corpus or data file cannot be used."""

    exit_code = 1
