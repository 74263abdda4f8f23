"""What every git call runs with: nothing a repository configures runs, and no credential.

A checkout's files are the PR's (in CI the PR head is checked out), and its configuration can
name them: a relative ``core.hooksPath``, an ``include.path`` of a tracked file, a filter or
diff driver that ``.gitattributes`` selects, an fsmonitor hook. After the PR's code has run,
the repository's configuration is whatever that code wrote. So each call pins, in git's
command-line scope (which outranks every configuration file and every include):

- ``core.hooksPath`` to ``/dev/null``: no hook runs, from ``.git/hooks`` or from any configured
  directory, because no file can exist under it (an empty directory of our own could gain a
  hook from any process of the same user, or from root, before the next call);
- ``core.fsmonitor=false``, ``submodule.recurse=false``, ``gc.auto=0``,
  ``maintenance.auto=false`` (no daemon or background job of git's own is started);
- every filter, diff and merge driver named in any configuration git reads for the repository
  (listed by ``git config`` just before the call), its commands set empty and
  ``filter.<name>.required`` false: a driver without a command does nothing, and attributes
  cannot run a driver no configuration gives a command. ``core.attributesFile``,
  ``GIT_ATTR_NOSYSTEM`` and ``GIT_CONFIG_NOSYSTEM`` do not stop a driver that the repository's own
  ``.git/config`` defines and its tracked ``.gitattributes`` selects (tests/bot/checkout/
  test_gitenv.py shows each); git 2.40's ``--attr-source`` would also drop the attributes' eol
  and encoding rules, which a checkout is measured with.

The pins travel as ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` (git 2.31),
so a driver name holding ``=`` or ``.`` cannot be misparsed as ``-c name=value`` would be.
The environment is built, not inherited: ``PATH``, ``HOME`` (the user's global configuration,
where ``safe.directory`` lives) and a few more, never a token, never ``GIT_DIR`` and its
kin (a variable of a calling git would point our calls at another repository).
``safe.directory`` is left to git: a repository owned by another user is refused (see git.py).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

TIMEOUT_S = 120
NO_HOOKS = os.devnull  # a path no hook can be put under
PINNED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", NO_HOOKS),
    ("core.fsmonitor", "false"),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
# the keys of a driver that name a command to run, and what each is pinned to
DRIVER_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("command", ""), ("textconv", "")),
    "merge": (("driver", ""),),
}
KEEP = ("PATH", "HOME", "XDG_CONFIG_HOME", "TMPDIR")
# what a fetch from the user's remote may need besides (ssh agent, proxies, CA bundles)
KEEP_NETWORK = ("SSH_AUTH_SOCK", "GIT_SSH", "GIT_SSH_COMMAND", "SSL_CERT_FILE", "SSL_CERT_DIR",
                "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY",
                "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")


def base_environment(network: bool = False,
                     inherited: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a git call may see: an allow-list, English messages (git.py reads
    them), no prompt for credentials, no optional index writes."""
    source = os.environ if inherited is None else inherited
    keep = KEEP + (KEEP_NETWORK if network else ())
    env = {k: source[k] for k in keep if k in source}
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return env


def _with_config(env: dict[str, str], pins: list[tuple[str, str]]) -> dict[str, str]:
    out = {**env, "GIT_CONFIG_COUNT": str(len(pins))}
    for i, (key, value) in enumerate(pins):
        out[f"GIT_CONFIG_KEY_{i}"], out[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return out


def driver_names(repo: str | Path, env: dict[str, str]) -> list[tuple[str, str]]:
    """``(section, name)`` of every filter, diff and merge driver the configuration of
    ``repo`` defines (system, global, the repository's, and what they include)."""
    proc = subprocess.run(["git", "-C", str(repo), "config", "-z", "--name-only",
                           "--get-regexp", r"^(filter|diff|merge)\."],
                          env=_with_config(env, list(PINNED)), capture_output=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    if proc.returncode not in (0, 1):  # 1: none defined
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout,
                                            proc.stderr)
    names: list[tuple[str, str]] = []
    for key in os.fsdecode(proc.stdout).split("\0"):
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if dot and section in DRIVER_KEYS and (section, name) not in names:
            names.append((section, name))
    return names


def environment(repo: str | Path, network: bool = False) -> dict[str, str]:
    """The whole environment of one git call in ``repo``: the allow-list and the pins."""
    env = base_environment(network)
    pins = list(PINNED)
    for section, name in driver_names(repo, env):
        pins += [(f"{section}.{name}.{key}", value) for key, value in DRIVER_KEYS[section]]
    return _with_config(env, pins)
