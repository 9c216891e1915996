"""The problem record every data check reports: ``path:line: field: message``.

Below both :mod:`audiorepro.data.manifests` (manifest and audio checks) and
:mod:`audiorepro.data.sources` (download checks), which report their findings as lists of
:class:`Problem`.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Problem"]


class Problem(NamedTuple):
    """One problem found by a check: where it is, which field, and what is wrong.

    ``line`` is 1-based, or ``None`` when the problem concerns a whole file. ``str(problem)``
    is the ``path:line: field: message`` form that compilers and editors understand.
    """

    path: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"
