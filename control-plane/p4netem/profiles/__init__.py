"""Impairment profiles: validated, human-unit descriptions of a link, and their conversion to
the `set_impairment` action params of the pipeline contract. See docs/profiles.md."""

from .errors import Problem, ProfileError
from .gilbert_elliott import GilbertElliott
from .library import BUILTIN_NAMES, builtin_profile, builtin_profiles
from .link import Correlation, JitterDistribution, LinkParams, Queue, Reorder
from .onoff import OnOff
from .profile import Profile
from .radio import RADIO_MODELS, Radio, RadioGprs, RadioLte, RadioNone, RadioUmts
from .radio_table import RADIO_PARAMS, RADIO_TABLE, SET_RADIO, decode_radio, encode_radio
from .table import (IMPAIRMENT_PARAMS, PROFILE_TABLE, SET_IMPAIRMENT, Direction, decode_link,
                    encode_link, same_table_params)
from .units import ByteSize, Duration, Percent, Rate, UnitError
from .yaml_files import dump, dumps, load_profile, load_profiles, loads_profiles

__all__ = [
    "Problem", "ProfileError", "GilbertElliott", "BUILTIN_NAMES",
    "builtin_profile", "builtin_profiles", "Correlation", "JitterDistribution", "LinkParams", "OnOff", "Queue",
    "Reorder", "Profile", "RADIO_MODELS", "Radio", "RadioGprs", "RadioLte", "RadioNone",
    "RadioUmts", "RADIO_PARAMS", "RADIO_TABLE", "SET_RADIO", "decode_radio", "encode_radio",
    "IMPAIRMENT_PARAMS", "PROFILE_TABLE", "SET_IMPAIRMENT", "Direction",
    "decode_link", "encode_link", "same_table_params", "ByteSize", "Duration", "Percent",
    "Rate", "UnitError", "dump", "dumps", "load_profile", "load_profiles", "loads_profiles",
]
