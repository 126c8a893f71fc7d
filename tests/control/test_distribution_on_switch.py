"""The user jitter distribution table on a running p4netem-switch: loaded by the controller
(Controller.load_distribution), read back (Controller.distribution), refused when it is bad or
the controller is not primary, and drawn from by `jitter_distribution: user` on the wire: a
constant +1 sigma table adds exactly delay + jitter to every packet, a two-valued table puts the
packets in two clusters at delay - jitter and delay + jitter."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist, median

import grpc
import pytest

from p4netem.control import Controller, P4RuntimeError, ProfileError
from p4netem.lab import SwitchProcess, TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.profiles import Profile
from p4netem.profiles.distribution import DIST_SCALE, TABLE_LEN, load_dist

P4NETEM = Path(sys.executable).parent / "p4netem"
MS = 1_000_000
DELAY, JITTER = 20 * MS, 8 * MS
COUNT, RATE = 400, 200  # 2 s of probes, 5 ms apart; done once all are in (no duplicates: stop_when_complete)


def user_profile(name: str) -> Profile:
    # keep_order false: with a table whose samples differ by 2 x jitter, keeping the release
    # order would hold the early packets behind the late ones (reorder_mode 0).
    return Profile.parse({"name": name, "uplink": {
        "delay": f"{DELAY}ns", "jitter": f"{JITTER}ns", "jitter_distribution": "user",
        "reorder": {"keep_order": False}}})


def test_load_and_read_back_every_cell(bare_switch: SwitchProcess) -> None:
    with Controller.connect(bare_switch.grpc_addr, election_id=2) as ctl:
        assert ctl.distribution() == (0,) * TABLE_LEN  # the user table before any load
        # Every int16 edge and a spread of values, in two's complement on the wire.
        table = tuple(-32768 if i == 0 else 32767 if i == 1 else (i * 7919) % 65536 - 32768
                      for i in range(TABLE_LEN))
        ctl.load_distribution(table)
        assert ctl.distribution() == table
        assert ctl.distribution("user") == table
        # The built-in tables are untouched, and the normal one is the normal quantiles.
        normal = ctl.distribution("normal")
        nd = NormalDist()
        assert list(normal) == sorted(normal)
        for i in (100, 1000, 2048, 3000, 4000):
            assert abs(normal[i] - nd.inv_cdf((i + 0.5) / TABLE_LEN) * DIST_SCALE) <= 2, i
        assert ctl.distribution("pareto") != table

        # Bad input: refused before anything is written.
        with pytest.raises(ProfileError, match=r"\[3\]: 40000 is outside -32768..32767"):
            ctl.load_distribution([0, 0, 0, 40000] + [0] * (TABLE_LEN - 4))
        with pytest.raises(ProfileError, match="4095 cells"):
            ctl.load_distribution([0] * (TABLE_LEN - 1))
        with pytest.raises(ProfileError, match=r"'uniform' is not a distribution table; allowed normal, pareto, "
                                               r"paretonormal, user \(it has no table\)"):
            ctl.distribution("uniform")
        with pytest.raises(ProfileError, match="'gauss' is not a distribution table"):
            ctl.distribution("gauss")
        assert ctl.distribution() == table

        # Only the primary writes; a backup's load is refused with the gRPC status and changes nothing.
        with Controller.connect(bare_switch.grpc_addr, election_id=1) as backup:
            assert not backup.is_primary and backup.distribution() == table
            with pytest.raises(P4RuntimeError) as exc:
                backup.load_distribution([1] * TABLE_LEN)
            assert exc.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert "not the primary" in exc.value.message
        assert ctl.distribution() == table

        # reset --hard puts the zeros back (the switch's initial user table).
        ctl.push_pipeline(keep_state=False)
        assert ctl.distribution() == (0,) * TABLE_LEN


def test_constant_table_adds_delay_plus_jitter_to_every_packet(lab: TwoHostLab, ctl: Controller,
                                                               tmp_path: Path) -> None:
    dist = tmp_path / "plus-one-sigma.dist"
    dist.write_text("# every sample +1 sigma\n8192\n")
    ctl.load_distribution(load_dist(dist))
    assert ctl.distribution() == (DIST_SCALE,) * TABLE_LEN
    ctl.apply(user_profile("plus-one"))
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=COUNT, rate=RATE, port=9020, stop_when_complete=True)
    assert result.lost == 0
    delays = sorted(result.delays_ns)
    # No packet leaves before delay + jitter (with 0.3 ms of clock and socket slack); a table of
    # zeros or a normal table would put about half of them below it.
    assert delays[0] >= DELAY + JITTER - 0.3 * MS, delays[0]
    # ... and not much later: the host adds tens of microseconds, stalls a few ms to a few packets.
    assert median(delays) <= DELAY + JITTER + 2 * MS, median(delays)
    assert delays[int(0.9 * len(delays))] <= DELAY + JITTER + 5 * MS


def test_two_valued_table_gives_two_clusters(lab: TwoHostLab, ctl: Controller, tmp_path: Path) -> None:
    dist = tmp_path / "two.dist"
    dist.write_text("-8192 8192\n")  # two entries, tiled: half the cells -1 sigma, half +1 sigma
    table = load_dist(dist)
    ctl.load_distribution(table)
    assert ctl.distribution() == table.values
    ctl.apply(user_profile("two-valued"))
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=COUNT, rate=RATE, port=9021, stop_when_complete=True)
    assert result.lost == 0
    # No packet can leave early, but one can leave late (a stall of the sender, the switch or
    # the receiver on a shared machine): a low draw pushed past DELAY is "between", not high.
    low = [d for d in result.delays_ns if d < DELAY]
    high = [d for d in result.delays_ns if d >= DELAY + JITTER - 0.3 * MS]
    between = [d for d in result.delays_ns if DELAY <= d < DELAY + JITTER - 0.3 * MS]
    # Each packet draws a cell uniformly: the low share is binomial(400, 1/2), 4 sigma = +/- 40
    # (a packet below delay + jitter can only be a low draw, whatever stall it met).
    assert 160 <= len(low) + len(between) <= 240, (len(low), len(between), len(high))
    assert min(low) >= DELAY - JITTER - 0.3 * MS and median(low) <= DELAY - JITTER + 2 * MS, median(low)
    assert median(high) <= DELAY + JITTER + 2 * MS, median(high)
    # Few in between: a low draw needs a stall of over 8 ms to get there.
    assert len(between) <= COUNT // 20, len(between)


def cli(*args: str, addr: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="160", P4NETEM_ADDR=addr)
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=60, env=env)


def test_cli_load_show_make_and_apply_netem_distribution_file(bare_switch: SwitchProcess, tmp_path: Path) -> None:
    addr = bare_switch.grpc_addr
    # A switch that does not answer (checked last): the command waits out its 5-s connect
    # timeout, so it runs beside the others (it touches no switch of theirs) instead of after them.
    unreachable = subprocess.Popen([str(P4NETEM), "distribution", "show"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   env=dict(os.environ, COLUMNS="160", P4NETEM_ADDR="127.0.0.1:1"))
    try:
        _cli_load_show_make_and_apply(addr, tmp_path)
        _, err = unreachable.communicate(timeout=60)
    finally:
        if unreachable.poll() is None:
            unreachable.kill()
            unreachable.wait()
    assert unreachable.returncode == 3 and err.startswith("error: switch 127.0.0.1:1: UNAVAILABLE"), err


def _cli_load_show_make_and_apply(addr: str, tmp_path: Path) -> None:
    r = cli("distribution", "show", addr=addr)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("user distribution table (4096 cells): all zeros: jitter_distribution user adds no "
                        "jitter until a table is loaded\n")

    bad = tmp_path / "bad.dist"
    bad.write_text("0 0\n0 99999\n")
    r = cli("distribution", "load", str(bad), addr=addr)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"error: {bad}: line 2: 99999 is outside -32768..32767 (a netem table entry is an int16: "
                        "sigma/8192)\n")
    r = cli("distribution", "load", str(tmp_path / "missing.dist"), addr=addr)
    assert r.returncode == 1 and r.stderr.startswith("error: [Errno 2] No such file or directory"), r.stderr

    two = tmp_path / "two.dist"
    two.write_text("-8192 8192\n")
    r = cli("distribution", "load", str(two), addr=addr)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"loaded the user distribution table: {two}: 2 entries tiled to 4096",
        "  in sigma: mean +0.000, sd 1.000, min -1.000, p1 -1.000, p10 -1.000, median +1.000, p90 +1.000, "
        "p99 +1.000, max +1.000 (2 distinct values)"]
    shown = json.loads(cli("distribution", "show", "--json", addr=addr).stdout)
    assert shown["values"] == [-8192, 8192] * 2048 and shown["table"] == "user" and shown["sd"] == 1.0
    # --dist prints a table that loads back to the same cells.
    saved = tmp_path / "saved.dist"
    saved.write_text(cli("distribution", "show", "--dist", addr=addr).stdout)
    assert load_dist(saved).values == (-8192, 8192) * 2048
    normal = json.loads(cli("distribution", "show", "--table", "normal", "--json", addr=addr).stdout)
    assert normal["quantiles"]["p50"] == 0.0 and 0.99 <= normal["sd"] <= 1.0

    # From samples: `make` writes the table maketable would, `load --from-samples` loads the same.
    samples = tmp_path / "delays.txt"
    values = [17 + (i % 7) + (i % 13) / 13 for i in range(2000)]
    samples.write_text("# ms\n" + "\n".join(map(str, values)))
    hint = f"to reproduce the samples: delay {statistics.mean(values):g} jitter {statistics.stdev(values):g}"
    out = tmp_path / "made.dist"
    r = cli("distribution", "make", str(samples), "-o", str(out), addr=addr)
    assert r.returncode == 0 and hint in r.stderr, (hint, r.stderr)
    r = cli("distribution", "load", "--from-samples", str(samples), addr=addr)
    assert r.returncode == 0, r.stderr
    assert "built from 2000 samples" in r.stdout and hint in r.stdout, r.stdout
    with Controller.connect(addr, election_id=1, primary=False) as reader:
        assert reader.distribution() == load_dist(out).values

    # apply --netem '... distribution FILE': the table is loaded, the profile draws from it.
    r = cli("apply", "--netem", f"delay 10ms 4ms distribution {two}", addr=addr)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"loaded the user distribution table: {two}: 2 entries tiled to 4096\n"
                               "applied netem to 1 rule(s)"), r.stdout
    (rule,) = json.loads(cli("show", "--json", addr=addr).stdout)["rules"]
    assert rule["uplink"]["jitter_distribution"] == "user" and rule["downlink"]["jitter"] == "4ms"
    with Controller.connect(addr, election_id=1, primary=False) as reader:
        assert reader.distribution() == (-8192, 8192) * 2048
    # A bad table in --netem changes nothing: exit 1, the table and the rule as they were.
    r = cli("apply", "--netem", f"delay 50ms 4ms distribution {bad}", addr=addr)
    assert r.returncode == 1 and r.stderr.startswith(f"error: netem options: distribution: {bad}: line 2:"), r.stderr
    assert json.loads(cli("show", "--json", addr=addr).stdout)["rules"][0]["uplink"]["delay"] == "10ms"

