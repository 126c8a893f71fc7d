"""Profiles through a running p4netem-switch: program every built-in profile with P4Runtime (its
two profile entries and its radio entry in one Write), read the tables back and turn the entries
into profiles again."""

from __future__ import annotations

from p4netem import pipeline as pl
from p4netem.profiles import Direction, Profile, builtin_profiles
from p4netem.profiles.program import write_profile


def test_builtin_profiles_read_back_from_the_switch_are_equal(lab):
    client = lab.client
    profiles = list(builtin_profiles().values())
    first_id = 100  # clear of the lab's own profile
    for offset, profile in enumerate(profiles):
        write_profile(client, profile, first_id + offset)
    # Writing again modifies the entries in place (here: every profile shifted by one).
    for offset, profile in enumerate(profiles[1:] + profiles[:1]):
        write_profile(client, profile, first_id + offset)
    for offset, profile in enumerate(profiles):
        write_profile(client, profile, first_id + offset)

    read: dict[tuple[int, int], dict[str, int]] = {}
    for entry in client.read_table_entries(pl.PROFILE):
        assert entry.action == pl.SET_IMPAIRMENT
        key = (entry.match["meta.profile_id"].value, entry.match["meta.direction"].value)
        read[key] = entry.params
    radios = {e.match["meta.profile_id"].value: e.params for e in client.read_table_entries(pl.RADIO_PROFILE)}
    assert all(e.action == pl.SET_RADIO for e in client.read_table_entries(pl.RADIO_PROFILE))

    for offset, profile in enumerate(profiles):
        up = read[(first_id + offset, Direction.UPLINK)]
        down = read[(first_id + offset, Direction.DOWNLINK)]
        back = Profile.from_table_params(profile.name, up, down, radio=radios[first_id + offset],
                                         title=profile.title, description=profile.description,
                                         source=profile.source)
        assert back == profile
        assert back.same_table_params(profile)
        assert (radios[first_id + offset]["model"] != 0) == profile.has_radio
