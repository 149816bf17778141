"""What can go wrong with a report's inputs, each naming the file (and the line) it concerns."""

from __future__ import annotations

import os

from ..errors import ConfigError, InputError, RewardZooError


class ReportInputError(InputError):
    """A report input cannot be used; names the file (``path``) and its 1-based ``line`` when known."""

    what = "file"

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, line: int | None = None):
        self.path, self.line = path, line
        where = f"{self.what} '{path}'" + (f", line {line}" if line is not None else "") if path is not None else ""
        super().__init__(f"{where}: {message}" if where else message)


class ScoreFileError(ReportInputError):
    """A score file is not what ``rewardzoo score`` writes."""

    what = "score file"


class ManifestFileError(ReportInputError):
    """A manifest line is malformed (the message names the line and field)."""

    what = "manifest"


class ReportMismatchError(ReportInputError):
    """Two inputs of a report do not describe the same samples (scores vs manifest, A vs B)."""


class ReportConfigError(ConfigError):
    """The config given to the report does not describe the score file, or a report option is invalid."""


class ReportDependencyError(RewardZooError, ImportError):
    """matplotlib or SciPy (the ``report`` extra) is missing."""

    def __init__(self, module: str):
        self.module = module
        super().__init__(
            f"`rewardzoo report` needs the module '{module}', which is not installed: pip install 'rewardzoo[report]'"
        )
