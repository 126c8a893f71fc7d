"""A named impairment profile: uplink and downlink LinkParams plus an optional radio model."""

from __future__ import annotations

import re
from typing import Annotated, Any, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from .errors import KNOWN_FIELDS, FieldProblems, Problem, ProfileError, problems_from_validation_error
from .fields import annotate, one_line
from .link import JitterDistribution, LinkParams
from .radio import Radio, RadioNone
from .radio_table import decode_radio, encode_radio, radio_params
from .table import Direction, encode_link
from .units import quote

__all__ = ["Profile"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def _validate_name(raw: Any) -> str:
    if isinstance(raw, str) and _NAME.match(raw):
        return raw
    raise ValueError(f"{quote(raw)} is not a profile id; use lowercase letters, digits and '-', "
                     "starting with a letter or digit, at most 63 characters")


ProfileName = Annotated[str, *annotate(_validate_name, str,
                                     {"type": "string", "pattern": _NAME.pattern})]

Title = one_line("title", max_len=100)
Description = one_line("description")
Source = one_line("source", max_len=1000)


class Profile(BaseModel):
    """name/title/description/source, per-direction impairment, and the UE's radio model.

    Input may use `both:` for parameters shared by the two directions; `uplink:`/`downlink:`
    keys override it field by field (a nested block such as `queue` is replaced whole).
    """

    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: ProfileName
    title: Title = ""  # display name; defaults to the name
    description: Description = ""
    source: Source = ""  # citation of the numbers
    uplink: LinkParams = LinkParams()
    downlink: LinkParams = LinkParams()
    radio: Radio = RadioNone()

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if "both" in data:
            both = data.pop("both")
            if both is None:
                both = {}
            if not isinstance(both, Mapping):
                raise FieldProblems([Problem("both", f"{quote(both)} is not a mapping of link "
                                             "parameters")])
            for direction in ("uplink", "downlink"):
                own = data.get(direction)
                if own is None:
                    data[direction] = dict(both)
                elif isinstance(own, Mapping):
                    data[direction] = {**both, **own}
                # anything else is reported by the field itself
        if isinstance(data.get("radio"), str):
            data["radio"] = {"model": data["radio"]}  # `radio: lte` shorthand
        elif "radio" in data and data["radio"] is None:
            data["radio"] = {"model": "none"}
        if not data.get("title") and isinstance(data.get("name"), str):
            data["title"] = data["name"]
        return data

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def parse(cls, data: Any, source: str | None = None) -> "Profile":
        """Validate a document (dict from YAML); raises ProfileError listing every problem."""
        if not isinstance(data, Mapping):
            raise ProfileError([Problem("", f"{quote(data)} is not a profile mapping")], source)
        shadowed = shadowed_both_problems(data)
        try:
            profile = cls.model_validate(data)
        except ValidationError as exc:
            problems = problems_from_validation_error(exc, data)
            raise ProfileError(problems + [p for p in shadowed if p not in problems], source) from None
        if shadowed:
            raise ProfileError(shadowed, source)
        return profile

    @classmethod
    def from_table_params(cls, name: str, uplink: Mapping[str, Any],
                          downlink: Mapping[str, Any], radio: Mapping[str, Any] | None = None,
                          **meta: Any) -> "Profile":
        """The profile that set_impairment (and set_radio) params read back from a switch mean.

        `radio` is the radio_profile entry's set_radio params (None: no entry, no radio; radio
        power figures are not in the table and come back as the model's defaults), or a radio
        model as a profile states it. `meta` may give title, description and source (tables do
        not hold them).
        """
        problems: list[Problem] = []
        links: dict[str, LinkParams] = {}
        for direction, params in (("uplink", uplink), ("downlink", downlink)):
            try:
                links[direction] = LinkParams.from_table_params(params)
            except ProfileError as exc:
                problems += exc.prefixed(direction)
        decoded: dict[str, Any] = {}
        if isinstance(radio, Mapping) and set(radio) & {name for _, name, _ in radio_params()}:
            try:
                decoded["radio"] = decode_radio(radio)
            except ProfileError as exc:
                problems += exc.prefixed("radio")
        elif radio is not None:
            decoded["radio"] = radio  # a radio model, or its YAML form
        if problems:
            raise ProfileError(problems, f"profile {name!r} from table params")
        return cls.parse({"name": name, **meta, **links, **decoded})

    def checked(self) -> "Profile":
        """This profile validated again, as `Profile.parse` would: a profile made with
        `model_copy(update=...)` or `model_construct()` skipped every check (pydantic does not
        validate those), so a dict where a LinkParams belongs, "50ms" where a Duration belongs
        or a loss of 150% would only fail deep inside the table encoding. Returns `self` when it
        is valid as it is (an equal profile when only its values' types were off); raises
        ProfileError naming each bad field with its allowed range."""
        source = f"profile {self.__dict__.get('name')!r}"
        try:
            doc = self.model_dump(warnings=False)
        except Exception as exc:  # a value no field can serialise (e.g. an arbitrary object)
            raise ProfileError([Problem("", f"cannot be read as a profile: {exc}")], source) from None
        again = Profile.parse(doc, source)
        return self if again == self else again

    # ---- use -----------------------------------------------------------------------------------
    def link(self, direction: Direction | str | int) -> LinkParams:
        return getattr(self, Direction.parse(direction).field)

    @property
    def has_radio(self) -> bool:
        return self.radio.model != "none"

    def to_table_params(self, direction: Direction | str | int) -> dict[str, int]:
        """The exact set_impairment action params (name -> int) for one direction.

        The radio is not part of them: it is the profile's one radio_profile entry
        (`radio_table_params()`), written in the same Write as these (profiles/program.py).
        """
        return encode_link(self.link(direction))

    def radio_table_params(self) -> dict[str, int]:
        """The exact set_radio action params (name -> int) of the profile's radio_profile entry
        (model 0 when the profile has no radio: that entry means "no radio")."""
        return encode_radio(self.radio)

    def same_table_params(self, other: "Profile") -> bool:
        """True when both profiles program the switch identically in both directions and in
        their radio entry (values closer than the quantisation step compare equal)."""
        return (encode_link(self.uplink) == encode_link(other.uplink)
                and encode_link(self.downlink) == encode_link(other.downlink)
                and encode_radio(self.radio) == encode_radio(other.radio))

    # ---- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The shortest document that parses back to this profile (defaults left out,
        `both` when the two directions are equal), in human units, ready for YAML."""
        doc: dict[str, Any] = {"name": self.name}
        if self.title != self.name:
            doc["title"] = self.title
        for key in ("description", "source"):
            if getattr(self, key):
                doc[key] = getattr(self, key)
        # Fields equal in both directions go under `both`, the rest under their direction.
        up, down = _link_dict(self.uplink), _link_dict(self.downlink)
        both = {key: value for key, value in up.items() if down.get(key) == value}
        if both:
            doc["both"] = both
        for name, own in (("downlink", down), ("uplink", up)):
            rest = {key: value for key, value in own.items() if key not in both}
            if rest:
                doc[name] = rest
        if self.has_radio:
            doc["radio"] = self.radio.model_dump(mode="json", exclude_defaults=True)
            doc["radio"]["model"] = self.radio.model
        return doc


def _link_dict(link: LinkParams) -> dict[str, Any]:
    doc = link.model_dump(mode="json", exclude_defaults=True)
    implied = JitterDistribution.NORMAL if link.jitter else JitterDistribution.NONE
    if link.jitter_distribution is implied:
        doc.pop("jitter_distribution", None)
    return doc


def shadowed_both_problems(data: Mapping[str, Any]) -> list[Problem]:
    """Problems of the `both` fields that both directions override. Expansion never reads them,
    so validating the expanded profile alone would take `both: {rate: fast}` next to an uplink
    and a downlink rate: a typo in the file the user should hear about, as in any other field.
    Each is checked as a field (lenient: whether it would have an effect is moot)."""
    both = data.get("both")
    own = [data.get(direction) for direction in ("uplink", "downlink")]
    if not isinstance(both, Mapping) or not all(isinstance(link, Mapping) for link in own):
        return []  # the fields report these
    shadowed = {key: value for key, value in both.items() if all(key in link for link in own)}
    if not shadowed:
        return []
    try:
        LinkParams.model_validate(shadowed, context={"lenient": True})
    except ValidationError as exc:
        return [Problem(f"both.{p.path}", p.message) for p in problems_from_validation_error(exc)]
    return []


KNOWN_FIELDS.update(Profile.model_fields, {"both"})
