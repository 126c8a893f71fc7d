"""p4netem controller API, end to end, against a running p4netem-switch.

    p4netem switch -i 1@veth-clients -i 2@veth-servers &      # or any running p4netem-switch
    .venv/bin/python examples/controller_api.py --switch 127.0.0.1:9559

What it does (docs/control.md explains each call):
  1. connects as the primary controller and forwards port 1 <-> port 2;
  2. puts all traffic on HSPA, then one client (10.0.0.2, UE 2) on LTE + 200 ms;
  3. switches the whole link to LTE atomically;
  4. runs a short timeline written in Python: a fading cell, a 300 ms handover outage, a weak
     cell, back to LTE;
  5. prints what the switch holds and its counters, then resets it to a plain wire.
"""

from __future__ import annotations

import argparse

from p4netem.control import Controller, Profile, Rule, Timeline
from p4netem.profiles.summary import link_summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--switch", default="127.0.0.1:9559", help="P4Runtime address HOST:PORT")
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--election-id", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="leave the profiles on the switch at the end")
    args = ap.parse_args()

    with Controller.connect(args.switch, device_id=args.device_id, election_id=args.election_id) as ctl:
        ctl.bump_in_the_wire(1, 2)

        # 2. Profiles by name (built-in), rules as objects or in the command-line form.
        ctl.apply("hspa")  # default rule: everything between port 1 (clients) and port 2
        phone = Rule.parse({"client": "10.0.0.2", "ue": 2})
        ctl.apply("lte-200ms", [phone])  # added above the first rule: this client wins

        # 3. An atomic switch: every packet gets HSPA or LTE, never a mix, both directions at once.
        result = ctl.apply("lte")
        print(f"switched {result.switched} rule(s); in force {(result.flip_done_ns - result.flip_sent_ns) / 1e6:.2f} ms "
              "after the write was sent")

        # 4. A timeline in Python: the same schema as a timeline YAML file.
        weak = Profile.parse({"name": "weak-cell", "both": {"delay": "80ms", "rate": "1Mbit", "loss": "2%"}})
        handover = Timeline.parse({
            "name": "handover",
            "profiles": [weak.to_dict()],
            "steps": [
                {"apply": "lte"},
                {"at": "200ms", "set": {"downlink.rate": "5Mbit", "delay": "40ms"}},  # signal fades
                {"at": "400ms", "outage": "300ms"},  # the handover gap
                {"apply": "weak-cell"},  # at 700 ms: attached to the new cell
                {"wait": "200ms"},
                {"apply": "lte"},  # at 900 ms: back on a good cell
                {"wait": "100ms"},
            ],
        })
        run = ctl.run_timeline(handover)
        for event in run.events:
            print(f"  {event.event.at_ns / 1e6:7.1f} ms  {event.event.action:<42} in force +{event.error_ns / 1e6:.2f} ms")

        # 5. Read back: rules with their profiles, then counters per rule and direction.
        for applied in ctl.applied():
            print(f"#{applied.number} {applied.rule.describe()} ue {applied.rule.ue}: {applied.label}")
            if applied.profile is not None:
                print(f"    downlink {link_summary(applied.profile.downlink)}")
        for row in ctl.stats().rows:
            c = row.counters
            print(f"{row.label:8} {row.direction:8} {row.profile:20} in {c.profile_in:6} out {c.profile_out:6} "
                  f"dropped {c.dropped}")
        if not args.keep:
            ctl.reset()


if __name__ == "__main__":
    main()
