"""Where each trend lives in the dashboard: the one stable URL scheme (docs/trends.md).

    index.html                                  every suite: its charts, a table of every model
    regressions.html                            every step found, newest first, with filters
    models/<suite>/<model>/<config>.html        one model in one config, its charts inline
    models/<suite>/<model>/<config>.json        that model's series and steps, as data
    trends.json                                 the suites' series and steps, and where each
                                                model's data is

Names come from results files (untrusted): each path part is kept as is when it is a plain name
(letters, digits, ``._-``, not starting with a dot) and otherwise made one, with a short hash of
the real name so that two different names never share a page. Plain parts need no URL quoting.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


def path_part(name: str) -> str:
    """A file-system and URL safe stand-in for ``name``; the identity for plain names."""
    if _PLAIN.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name)[:60].strip("_") or "x"
    return f"{stem}-{digest}"


MODEL_PAGE = "models/{suite}/{model}/{config}.html"


def model_page(suite: str, model: str, config: str) -> str:
    """Path of a model's page, relative to the site root."""
    return MODEL_PAGE.format(suite=path_part(suite), model=path_part(model),
                             config=path_part(config))


def model_data(suite: str, model: str, config: str) -> str:
    """Path of a model's data (its page's series as JSON), beside its page."""
    return model_page(suite, model, config)[:-len(".html")] + ".json"


def trend_url_template(base_url: str) -> str:
    """The ``trend_url`` for ``render_markdown``: ``{suite}``, ``{model}``, ``{config}`` are
    filled with ``path_part`` of the row's names, so the link is the page ``trends`` wrote."""
    return f"{base_url.rstrip('/')}/{MODEL_PAGE}"


def fill(template: str, *, suite: str, model: str, config: str) -> str:
    return (template.replace("{suite}", path_part(suite)).replace("{model}", path_part(model))
            .replace("{config}", path_part(config)))


@dataclass(frozen=True)
class Links:
    """URL templates of a run's report (``{run_id}``) and of a commit (``{commit}``), and of a
    pull request (``{pr}``); None: not linked."""

    report: str | None = None
    commit: str | None = None
    pr: str | None = None

    @classmethod
    def for_repository(cls, repository: str | None, report: str | None = None) -> Links:
        """GitHub's commit and PR pages when the runs name one ``OWNER/NAME``."""
        if repository and repository.count("/") == 1 and not repository.startswith("/"):
            base = f"https://github.com/{repository}"
            return cls(report=report, commit=base + "/commit/{commit}", pr=base + "/pull/{pr}")
        return cls(report=report)
