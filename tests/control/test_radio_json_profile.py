"""`radio show --json` (and stats --json's "radio"): `profile` is the profile's name, as in the
rows of `show --json` and `stats --json`, and `profile_label` the table's text (a `set` makes it
"NAME (modified)" while the name stays)."""

from __future__ import annotations


def test_radio_view_names_the_profile_and_labels_it(lab):
    from p4netem.control import Controller

    with Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
        ctl.reset()
        ctl.apply("hspa")
        ctl.set({"downlink.delay": "80ms"})
        ue = ctl.radio().ues[0].to_dict()
        assert ue["profile"] == "hspa"
        assert ue["profile_label"] == "hspa (modified)"
        stats_ue = ctl.stats().to_dict()["radio"]["ues"][0]
        assert (stats_ue["profile"], stats_ue["profile_label"]) == ("hspa", "hspa (modified)")
