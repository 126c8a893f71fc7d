"""`p4netem stats --json` and `p4netem show --json` name a rule's profile alike, so a script joins
the two on the rule's number: `profile` is the profile's name in both (null when the switch's
parameters match no profile this command knows), and stats keeps the label its table shows
("hspa (modified)", "profile id 0") in `profile_label`. Before, stats' `profile` was that label,
so a rule changed in place by `set` read "hspa (modified)" in stats and "hspa" in show."""

from __future__ import annotations

import json

from p4netem.control import Controller
from p4netem.lab import SwitchProcess

from test_cli import cli


def _json(*args: str, addr: str) -> dict:
    r = cli(*args, "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_stats_and_show_json_join_on_the_rule_number_and_the_profile_name(bare_switch: SwitchProcess,
                                                                         tmp_path) -> None:
    addr = bare_switch.grpc_addr
    mine = tmp_path / "my-link.yaml"
    mine.write_text("name: my-link\nboth: {delay: 7ms}\n")
    with Controller.connect(addr, election_id=3) as ctl:
        ctl.apply("lte", ["client=10.0.0.1"])
        ctl.apply("hspa", ["client=10.0.0.2"])
        ctl.set({"downlink.rate": "1Mbit"}, ["client=10.0.0.2"])  # in place: "hspa (modified)"
        ctl.apply(mine, ["client=10.0.0.3"])  # a profile from a file: unknown without --profiles

    for extra in ((), ("--profiles", str(mine))):
        shown = _json("show", *extra, addr=addr)
        stats = _json("stats", *extra, addr=addr)
        by_number = {r["number"]: r for r in shown["rules"]}
        rows = [r for r in stats["rows"] if r["number"] is not None]
        assert len(rows) == 2 * len(by_number) == 6, stats["rows"]
        for row in rows:
            assert row["label"] == f"#{row['number']}", row
            assert row["profile"] == by_number[row["number"]]["profile"], (row, by_number[row["number"]])
        names = {r["rule"]["client"]: (r["profile"], r["modified"] != []) for r in shown["rules"]}
        named = "my-link" if extra else None
        assert names == {"10.0.0.1": ("lte", False), "10.0.0.2": ("hspa", True), "10.0.0.3": (named, False)}
        labels = {(r["profile"], r["profile_label"]) for r in rows}
        assert labels == {("lte", "lte"), ("hspa", "hspa (modified)"),
                          (named, "my-link" if extra else "unknown profile")}, labels
        # Rows that are no rule's have no profile name; their label says which profile id.
        (default,) = [r for r in stats["rows"] if r["label"] == "default"]
        assert (default["number"], default["profile"], default["profile_label"]) == (None, None, "profile id 0")

    # The table shows the label, as before.
    table = cli("stats", "--once", addr=addr)
    assert table.returncode == 0 and "hspa (modified)" in table.stdout and "unknown profile" in table.stdout, \
        table.stdout
