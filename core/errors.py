"""The one error hierarchy of compilewatch.

Library errors (SQLAlchemy, PyGithub, git, torch) are wrapped where they enter. The CLI maps
``CompilewatchError`` to its ``exit_code`` with the message; anything else is a bug (exit 3).
Exit codes are documented in docs/cli.md.
"""

from __future__ import annotations


class CompilewatchError(Exception):
    """A failure the user can act on; the message says what to do next."""

    exit_code = 2


class UsageError(CompilewatchError):
    """Bad command-line input or configuration."""


class ResultsFileError(CompilewatchError):
    """A results file is unreadable, of an unknown version, or fails validation."""


class SuiteError(CompilewatchError):
    """A suite cannot be found or loaded, or a model registration is invalid."""


class DatabaseError(CompilewatchError):
    """The database is unreachable, out of date, or refused a write."""


class GitError(CompilewatchError):
    """A git command failed (bad ref, not a repository, worktree trouble)."""


class GitHubError(CompilewatchError):
    """GitHub stayed unavailable or refused a request after retries."""


class CacheArtifactError(CompilewatchError):
    """A compile-cache artifact is corrupt, truncated or for another environment."""


class RemoteCacheError(CompilewatchError):
    """The shared compile cache cannot be reached, refuses a credential, or would let the
    repository's code write what trusted runs load."""


class EnvironmentProblem(CompilewatchError):
    """This machine cannot run the main job (``compilewatch doctor`` says why)."""


class NothingMeasured(CompilewatchError):
    """A run, comparison or dashboard with nothing in it (every model skipped, no run matched
    the filters); commands refuse it unless the user passes ``--allow-empty``."""


class RegressionFound(CompilewatchError):
    """Raised by gating commands: a gating regression was found."""

    exit_code = 1
