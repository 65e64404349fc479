"""The refusal of a corpus the user named or gave (exit 2), beside DataError (exit 1), which stays for what fails
beyond the user's input: a download, a package registry, sentencepiece."""

from __future__ import annotations

from ..errors import DataError


class DataInputError(DataError):
    """Bad input to a corpus: an unknown recipe or a name that is none, a direction, an option the recipe does not
    take, the user's own file, a vocabulary size, a data directory, a prepared copy that is damaged or missing.
    One line naming what is wrong and what is allowed, exit 2 (the project's user-error code), as for every
    UserError; a DataError still, for those who catch that."""

    exit_code = 2
