"""What a comparison says about whose code each side imported (``suites/imports.py``).

A side refuses the repository's modules from outside its checkout, so a finished comparison
has both sides on their own code; what is left to say is where the two sides' imports differ
(a package moved to ``src/``, a module one side takes from an installed copy) and which of the
repository's modules came from an installed copy on purpose (``--allow-installed``): a change
to those is not what was measured.
"""

from __future__ import annotations

from compilewatch.core.schema import ModuleOrigin, RunResults

MAX_LISTED = 8  # modules named in one note


def _said(origin: ModuleOrigin | None) -> str:
    if origin is None:
        return "not imported"
    if origin.where == "checkout":
        return f"the checkout ({origin.path})"
    return f"an installed copy ({origin.path})"


def code_notes(base: RunResults, head: RunResults) -> list[str]:
    """Notes for the comparison: the repository's modules whose origin differs between the
    sides, and those measured from an installed copy on purpose."""
    b = base.code.modules if base.code else {}
    h = head.code.modules if head.code else {}
    differ = [name for name in sorted(b.keys() & h.keys())
              if "checkout" in (b[name].where, h[name].where)
              and (b[name].where, b[name].path) != (h[name].where, h[name].path)]
    notes = []
    if differ:
        parts = [f"{n}: base from {_said(b[n])}, head from {_said(h[n])}"
                 for n in differ[:MAX_LISTED]]
        more = f"; and {len(differ) - MAX_LISTED} more" if len(differ) > MAX_LISTED else ""
        notes.append("the sides imported the repository's code from different places: "
                     + "; ".join(parts) + more)
    allowed = sorted(n for n, o in {**b, **h}.items() if o.allowed)
    if allowed:
        notes.append(f"{', '.join(allowed[:MAX_LISTED])} came from an installed copy "
                     "(--allow-installed), not from each side's checkout: a change to "
                     f"{'it' if len(allowed) == 1 else 'them'} in this PR is not measured")
    return notes
