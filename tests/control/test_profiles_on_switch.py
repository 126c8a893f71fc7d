"""Profiles through a running p4netem-switch: program every built-in profile with P4Runtime,
read the profile table back and turn the entries into profiles again."""

from __future__ import annotations

from p4netem import pipeline as pl
from p4netem.profiles import Direction, Profile, builtin_profiles


def test_builtin_profiles_read_back_from_the_switch_are_equal(lab):
    client = lab.client
    profiles = list(builtin_profiles().values())
    first_id = 100  # clear of the lab's own profile
    for offset, profile in enumerate(profiles):
        for direction in Direction:
            client.insert_table_entry(
                pl.PROFILE,
                {"meta.profile_id": first_id + offset, "meta.direction": int(direction)},
                pl.SET_IMPAIRMENT,
                profile.to_table_params(direction, ignore_radio=True),
            )

    read: dict[tuple[int, int], dict[str, int]] = {}
    for entry in client.read_table_entries(pl.PROFILE):
        assert entry.action == pl.SET_IMPAIRMENT
        key = (entry.match["meta.profile_id"].value, entry.match["meta.direction"].value)
        read[key] = entry.params

    for offset, profile in enumerate(profiles):
        up = read[(first_id + offset, Direction.UPLINK)]
        down = read[(first_id + offset, Direction.DOWNLINK)]
        back = Profile.from_table_params(profile.name, up, down, title=profile.title,
                                         description=profile.description,
                                         source=profile.source, radio=profile.radio)
        assert back == profile
        assert back.same_table_params(profile)
