"""Impairment profiles: validated, human-unit descriptions of a link, and their conversion to
the `set_impairment` action params of the pipeline contract. See docs/profiles.md.

The names below are imported from their submodule when first used (p4netem.lazy_exports), so
that importing one submodule (the units, the errors) does not build every model."""

from ..lazy_exports import lazy_exports

_EXPORTS = {
    ".errors": ("Problem", "ProfileError"),
    ".gilbert_elliott": ("GilbertElliott",),
    ".library": ("BUILTIN_NAMES", "builtin_profile", "builtin_profiles"),
    ".link": ("Correlation", "JitterDistribution", "LinkParams", "Queue", "Reorder"),
    ".onoff": ("OnOff",),
    ".profile": ("Profile",),
    ".radio": ("RADIO_MODELS", "Radio", "RadioGprs", "RadioLte", "RadioNone", "RadioUmts"),
    ".radio_table": ("RADIO_PARAMS", "RADIO_TABLE", "SET_RADIO", "decode_radio", "encode_radio"),
    ".table": ("IMPAIRMENT_PARAMS", "PROFILE_TABLE", "SET_IMPAIRMENT", "Direction", "decode_link", "encode_link",
               "same_table_params"),
    ".units": ("ByteSize", "Duration", "Percent", "Rate", "UnitError"),
    ".yaml_files": ("dump", "dumps", "load_profile", "load_profiles", "loads_profiles"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "Problem", "ProfileError", "GilbertElliott", "BUILTIN_NAMES",
    "builtin_profile", "builtin_profiles", "Correlation", "JitterDistribution", "LinkParams", "OnOff", "Queue",
    "Reorder", "Profile", "RADIO_MODELS", "Radio", "RadioGprs", "RadioLte", "RadioNone",
    "RadioUmts", "RADIO_PARAMS", "RADIO_TABLE", "SET_RADIO", "decode_radio", "encode_radio",
    "IMPAIRMENT_PARAMS", "PROFILE_TABLE", "SET_IMPAIRMENT", "Direction",
    "decode_link", "encode_link", "same_table_params", "ByteSize", "Duration", "Percent",
    "Rate", "UnitError", "dump", "dumps", "load_profile", "load_profiles", "loads_profiles",
]
