"""Errors a user can cause: the CLI prints their message in one line and exits non-zero."""


class UserError(Exception):
    """Bad input (config, spec, data file, path, address): the message says what is wrong and what is allowed."""

    exit_code = 2


class ConfigError(UserError, ValueError):
    """A configuration value is invalid."""


class DataError(UserError):
    """A corpus or data file cannot be used."""

    exit_code = 1
