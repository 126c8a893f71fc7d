"""Profile errors: every problem of a profile (or file) at once, each with its field path.

Pydantic reports errors as (loc, type, msg); this module turns them into lines such as
`downlink.rate: "-3Mbit" is not a rate (negative); allowed 1kbit..100Gbit or "unlimited"`,
mapping problems of values that came from the `both` shorthand back to `both.<field>` so a
bad shared value is reported once, where the user wrote it.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from .units import quote

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["Problem", "ProfileError", "FieldProblems", "problems_from_validation_error"]


@dataclass(frozen=True)
class Problem:
    path: str  # dotted field path, "" for the whole document
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


# An error is read by a person: the first problems, each on one line of bounded length (a file
# can hold thousands of bad entries, or one value as long as the file).
MAX_SHOWN = 50
MAX_LINE = 1000


def _line(text: str) -> str:
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 1] + "…"


class ProfileError(ValueError):
    """A profile, a file of profiles or a set of table parameters that is not valid.

    `problems` lists every problem found; `source` names the file (or other origin) if any.
    """

    def __init__(self, problems: Sequence[Problem], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"{self.source}: " if self.source else ""
        if len(self.problems) == 1:
            return head + _line(str(self.problems[0]))
        lines = [f"{head}{len(self.problems)} problems"]
        lines += [f"  {_line(str(problem))}" for problem in self.problems[:MAX_SHOWN]]
        if len(self.problems) > MAX_SHOWN:
            lines.append(f"  ... and {len(self.problems) - MAX_SHOWN} more")
        return "\n".join(lines)

    def with_source(self, source: str) -> "ProfileError":
        return ProfileError(self.problems, source)

    def prefixed(self, prefix: str) -> list[Problem]:
        return [Problem(_join(prefix, p.path), p.message) for p in self.problems]


class FieldProblems(ValueError):
    """Raised inside a validator to report several problems, each relative to the model being
    validated (for example `jitter` and `queue` of one direction)."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


# Every field name of every profile model, for "did you mean" hints on unknown keys.
KNOWN_FIELDS: set[str] = set()
# Each radio model's fields (radio.py fills it): an error names the model a field belongs to.
RADIO_FIELDS: dict[str, tuple[str, ...]] = {}
# The modules whose models add their fields to those two when imported (profile.py imports the
# link, loss and radio models).
_FIELD_MODULES = ("p4netem.profiles.profile", "p4netem.control.rules", "p4netem.control.timeline")


def _register_all_fields() -> None:
    """Every model's fields in KNOWN_FIELDS and RADIO_FIELDS, whatever this process imported so far:
    the packages import their models when first used (p4netem.lazy_exports), and a hint must not
    depend on which ones that was."""
    for name in _FIELD_MODULES:
        importlib.import_module(name)

# Discriminated unions put the tag in the location ("radio", "umts", "tail"): drop it.
_UNION_TAGS = {"none", "umts", "lte", "gprs"}


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _loc_to_path(loc: Sequence[Any]) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif i > 0 and loc[i - 1] == "radio" and item in _UNION_TAGS:
            continue
        elif isinstance(item, str) and item.startswith("function-"):
            continue  # pydantic's names for plain validators in unions
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _message(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    raw = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "extra_forbidden":
        _register_all_fields()
        loc = list(error["loc"])
        field = loc[-1] if loc else "?"
        model = loc[-2] if len(loc) >= 3 and loc[-3] == "radio" and loc[-2] in RADIO_FIELDS else None
        if model is not None:
            owners = [m for m, names in RADIO_FIELDS.items() if field in names and m != model]
            if owners:
                fields = ", ".join(n for n in RADIO_FIELDS[model] if n != "model")
                return (f"not a field of the {model} radio model (it belongs to {' and '.join(owners)}); "
                        + (f"{model}'s fields: {fields}" if fields else f"{model} has no other field"))
        if field in KNOWN_FIELDS:
            return "unknown field here (it belongs to another block or radio model)"
        close = difflib.get_close_matches(str(field), sorted(KNOWN_FIELDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown field{hint}"
    if kind == "missing":
        return "required"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{quote(raw)} is not a mapping"
    if kind == "union_tag_invalid":
        return (f"{quote(ctx.get('tag'))} is not a radio model; "
                f"allowed {ctx.get('expected_tags', '').replace(chr(39), '')}")
    if kind == "union_tag_not_found":
        return "needs a 'model' key (none, umts, lte, gprs)"
    if kind == "list_type":
        return f"{quote(raw)} is not a list"
    return f"{error['msg']} (got {quote(raw)})"


def problems_from_validation_error(exc: ValidationError, raw: Any = None) -> list[Problem]:
    """Translate a pydantic error into problems; `raw` is the input document, used to report
    values inherited from `both` under `both`."""
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        ctx = error.get("ctx") or {}
        inner = ctx.get("error")
        if isinstance(inner, FieldProblems):
            found = [Problem(_join(_loc_to_path(loc), p.path), p.message) for p in inner.problems]
        else:
            if error["type"].startswith("union_tag"):
                loc.append("model")  # the problem is the tag itself
            found = [Problem(_loc_to_path(loc), _message(error))]
        problems.extend(blame_both(p, raw) for p in found)
    unique: list[Problem] = []
    for problem in problems:
        if problem not in unique:
            unique.append(problem)
    return unique


def blame_both(problem: Problem, raw: Any) -> Problem:
    """uplink.rate -> both.rate when the bad rate was written under `both`, not `uplink` (`raw`:
    the profile document as written, before `both` was expanded)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("both"), Mapping):
        return problem
    direction, _, rest = problem.path.partition(".")
    if direction not in ("uplink", "downlink") or not rest:
        return problem
    key = rest.split(".", 1)[0].split("[", 1)[0]
    own = raw.get(direction)
    if key in raw["both"] and not (isinstance(own, Mapping) and key in own):
        return Problem(f"both.{rest}", problem.message)
    return problem
