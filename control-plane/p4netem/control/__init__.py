"""Controller API of p4netem: profiles applied to rules on a running switch, atomically.

    from p4netem.control import Controller, Rule, Timeline

    with Controller.connect("127.0.0.1:9559", device_id=1, election_id=1) as ctl:
        ctl.bump_in_the_wire(1, 2)             # forward port 1 <-> 2
        ctl.apply("hspa")                      # all traffic between ports 1 (clients) and 2
        ctl.apply("lte-200ms", ["client=10.0.0.2,ue=2"])   # one client on another profile
        ctl.apply("lte")                       # atomic switch of the whole-link rule
        ctl.applied()                          # [AppliedRule(number, rule, profile, ...)]
        ctl.stats().rows                       # [LinkStats(label, direction, profile, counters)]
        ctl.radio().ues                        # [UeRadioView]: state, promotions, energy per UE
        ctl.reset()                            # back to a plain wire

Pieces:
  Controller        connect (arbitration, election id, reconnect), pipeline verify/push, port map,
                    apply / apply_many / prepare+commit (atomic switch), applied, remove, reset, stats,
                    radio (per-UE radio state of the UEs the rules cover)
  Rule              which traffic (switch ports, addresses, L4 ports, protocol, DSCP) and which UE
                    (one id, or one per client address: ue=by-address)
  parse_rule_option the command-line form "client=10.0.0.1,server.ports=443,ue=7"
  Timeline          timed steps (apply, set, outage, restore, wait) from YAML or Python, run with
                    Controller.run_timeline() / TimelinePlayer

Errors: bad input raises ProfileError / RuleError / TimelineError (subclasses of ValueError listing
every problem with its field path) before anything is written; switch failures raise
P4RuntimeError with `.code` (grpc.StatusCode) and `.message`. docs/control.md has the details.
"""

from ..lazy_exports import lazy_exports

# Imported from their submodule when first used (p4netem.lazy_exports): importing one submodule
# (the rules, the radio view) does not import the controller, grpc and every model.
__getattr__, __dir__ = lazy_exports(__name__, {
    "..p4rt": ("P4RuntimeError", "WriteError"),
    "..profiles": ("Profile", "ProfileError"),
    ".controller": ("DEFAULT_RULE", "AppliedRule", "ApplyResult", "Controller", "LinkStats", "ProfileSwitch",
                    "SwitchStats", "profile_differences"),
    ".radio_view": ("RadioReport", "UeRadioView"),
    ".rules": ("BY_ADDRESS", "Endpoint", "PortRange", "Rule", "RuleError", "load_rules", "parse_rule_option"),
    ".state": ("ManagedRule", "SwitchState"),
    ".timeline": ("OUTAGE", "Event", "EventResult", "Step", "Timeline", "TimelineError", "TimelinePlayer",
                  "TimelineResult", "modify_profile"),
})

__all__ = [
    "BY_ADDRESS", "RadioReport", "UeRadioView", "DEFAULT_RULE", "AppliedRule", "ApplyResult", "Controller", "Endpoint", "LinkStats", "ManagedRule",
    "P4RuntimeError", "PortRange", "Profile", "ProfileError", "ProfileSwitch", "Rule", "RuleError",
    "SwitchState", "SwitchStats", "WriteError", "OUTAGE", "Event", "EventResult", "Step", "Timeline",
    "TimelineError", "TimelinePlayer", "TimelineResult", "modify_profile", "load_rules", "parse_rule_option",
    "profile_differences",
]
