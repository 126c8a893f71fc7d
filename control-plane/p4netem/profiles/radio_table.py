"""Radio models <-> the `set_radio` action params of the pipeline contract (table radio_profile).

Quantisation: durations are whole nanoseconds (exact both ways); the FACH rate is encoded like a
link rate (fach_ns_per_byte_q16 = round_half_up(8e9 * 65536 / bit_per_s), 0 = no FACH pacing)
and read back as the shortest rate with that encoding. So decode(encode(r)) == r for every radio
written with no more digits than that step allows, and encode(decode(t)) == t for every table
value a valid radio can produce. Power figures are not part of the table (decode gives defaults).

Params a model does not use are 0 (e.g. an LTE radio has idle_to_dch_ns 0).
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from pydantic import ConfigDict, TypeAdapter, ValidationError

from .. import pipeline as pl
from .. import schema
from .action_params import ParamWidths
from .errors import Problem, ProfileError, problems_from_validation_error
from .radio import Radio, RadioGprs, RadioLte, RadioNone, RadioUmts
from .units import Duration, ns_per_byte_q16_to_rate, rate_to_ns_per_byte_q16

__all__ = ["RADIO_PARAMS", "SET_RADIO", "RADIO_TABLE", "encode_radio", "decode_radio"]

RADIO_TABLE = pl.RADIO_PROFILE
SET_RADIO = pl.SET_RADIO


# RADIO_PARAMS, (param id, name, bit width) of set_radio in contract order: read from the contract
# P4Info (p4netem.schema), never written out here; when first used (module __getattr__), as
# parsing the P4Info is not needed to import, list or validate profiles.
@functools.cache
def radio_params() -> tuple[tuple[int, str, int], ...]:
    return schema.action_params(SET_RADIO)


@functools.cache
def _params() -> ParamWidths:
    return ParamWidths(SET_RADIO, radio_params())


def __getattr__(name: str) -> Any:
    if name == "RADIO_PARAMS":
        return radio_params()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MODEL_CODES = {"none": pl.RadioModel.NONE, "umts": pl.RadioModel.UMTS, "lte": pl.RadioModel.LTE,
                "gprs": pl.RadioModel.GPRS}
# Built on first use (defer_build): importing the profiles must stay quick (p4netem.cli.common).
_RADIO = TypeAdapter(Radio, config=ConfigDict(defer_build=True))


def encode_radio(radio: RadioNone | RadioUmts | RadioLte | RadioGprs) -> dict[str, int]:
    """set_radio params (name -> unsigned int), in param-id order; all 0 but model for none."""
    params = pl.radio_params(model=int(_MODEL_CODES[radio.model]))
    if isinstance(radio, RadioUmts):
        params.update(
            idle_to_dch_ns=int(radio.promotion_idle_dch),
            fach_to_dch_ns=int(radio.promotion_fach_dch),
            dch_fach_timer_ns=int(radio.inactivity_dch_fach),
            fach_idle_timer_ns=int(radio.inactivity_fach_idle),
            rlc_ul_bytes=int(radio.fach_threshold_uplink),
            rlc_dl_bytes=int(radio.fach_threshold_downlink),
            fach_ns_per_byte_q16=rate_to_ns_per_byte_q16(radio.fach_rate),
        )
    elif isinstance(radio, RadioLte):
        params.update(
            idle_to_connected_ns=int(radio.promotion),
            drx_inactivity_ns=int(radio.drx_inactivity),
            short_drx_time_ns=int(radio.short_drx_time),
            short_drx_cycle_ns=int(radio.short_drx_cycle),
            long_drx_cycle_ns=int(radio.long_drx_cycle),
            drx_on_ns=int(radio.on_duration),
            tail_ns=int(radio.tail),
        )
    elif isinstance(radio, RadioGprs):
        standby = radio.promotion if radio.promotion_standby_ready is None else radio.promotion_standby_ready
        params.update(
            idle_to_connected_ns=int(radio.promotion),
            standby_to_ready_ns=int(standby),
            ready_timer_ns=int(radio.ready_timer),
            tail_ns=int(radio.standby_timer),
        )
    if not isinstance(radio, RadioNone):
        params.update(promo_spread_ns=int(radio.promotion_spread), promo_queue_pkts=int(radio.promotion_queue))
    _params().check_encoded(params)
    return params


def decode_radio(params: Mapping[str, Any]) -> RadioNone | RadioUmts | RadioLte | RadioGprs:
    """The radio that set_radio `params` (name -> int or big-endian bytes) mean.

    Every param of the contract must be present; params the model does not use are ignored.
    Raises ProfileError naming each bad param (unknown, missing, too wide, model out of 0..3, or
    a value the model refuses).
    """
    problems: list[Problem] = []
    values = _params().decode(params, problems)
    if not problems and values["model"] not in _MODEL_CODES.values():
        problems.append(Problem("model", f"{values['model']} is not a radio model; allowed 0 (none), "
                                "1 (umts), 2 (lte), 3 (gprs)"))
    if problems:
        raise ProfileError(problems, SET_RADIO)

    v = values
    ns = Duration
    model = pl.RadioModel(v["model"])
    common = {"promotion_spread": ns(v["promo_spread_ns"]), "promotion_queue": v["promo_queue_pkts"]}
    if model is pl.RadioModel.NONE:
        data: dict[str, Any] = {"model": "none"}
    elif model is pl.RadioModel.UMTS:
        data = {"model": "umts", "promotion_idle_dch": ns(v["idle_to_dch_ns"]),
                "promotion_fach_dch": ns(v["fach_to_dch_ns"]),
                "inactivity_dch_fach": ns(v["dch_fach_timer_ns"]),
                "inactivity_fach_idle": ns(v["fach_idle_timer_ns"]),
                "fach_threshold_uplink": v["rlc_ul_bytes"], "fach_threshold_downlink": v["rlc_dl_bytes"],
                "fach_rate": ns_per_byte_q16_to_rate(v["fach_ns_per_byte_q16"]), **common}
    elif model is pl.RadioModel.LTE:
        data = {"model": "lte", "promotion": ns(v["idle_to_connected_ns"]),
                "drx_inactivity": ns(v["drx_inactivity_ns"]), "short_drx_cycle": ns(v["short_drx_cycle_ns"]),
                "short_drx_time": ns(v["short_drx_time_ns"]), "long_drx_cycle": ns(v["long_drx_cycle_ns"]),
                "on_duration": ns(v["drx_on_ns"]), "tail": ns(v["tail_ns"]), **common}
    else:
        standby = v["standby_to_ready_ns"]
        data = {"model": "gprs", "promotion": ns(v["idle_to_connected_ns"]),
                "promotion_standby_ready": None if standby == v["idle_to_connected_ns"] else ns(standby),
                "ready_timer": ns(v["ready_timer_ns"]), "standby_timer": ns(v["tail_ns"]), **common}
    try:
        return _RADIO.validate_python(data)
    except ValidationError as exc:
        raise ProfileError([Problem(f"set_radio ({p.path})", p.message)
                            for p in problems_from_validation_error(exc)], SET_RADIO) from None
