"""`p4netem replay --expect`: a failed expectation shows the value as the metrics' table does.

The table showed 3 decimals and the failed expectation's line 4 (`delay_p50_ms < 10: got 20.0225`
under a table saying 20.023), so the two did not read as the same figure. Both now use
p4netem.replay.report.format_metric; the test renders the command's own table (metrics_table)
of a real report and compares."""

from __future__ import annotations

from rich.console import Console

from p4netem.cli.replay_cmd import metrics_table
from p4netem.replay import PacketFate, ReplayReport, check_expectations, parse_expectations
from p4netem.replay.match import Fate
from p4netem.replay.report import format_metric

MS = 1_000_000


def _report() -> ReplayReport:
    """Ten frames 2 ms apart, one lost; the delivered ones delayed 20.01634 ms and a little more."""
    fates = []
    for i in range(10):
        tx = i * 2 * MS
        if i == 3:
            fates.append(PacketFate(i, tx, 242))
        else:
            fates.append(PacketFate(i, tx, 242, Fate.DELIVERED, tx + 20_016_340 + i * 1_234, copies=1))
    return ReplayReport(fates)


def _table_cells(metrics: dict) -> dict[str, str]:
    console = Console(width=200, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(metrics_table("capture through lan", metrics))
    cells = {}
    for line in console.export_text().splitlines():
        parts = [p.strip() for p in line.strip("│┃ ").replace("┃", "│").split("│")]
        if len(parts) == 2 and parts[0] in metrics:
            cells[parts[0]] = parts[1]
    return cells


def test_a_failed_expectation_shows_the_value_as_the_table_does() -> None:
    metrics = _report().metrics()
    cells = _table_cells(metrics)
    assert cells["delay_p50_ms"] == "20.023" and cells["loss_pct"] == "10.000" and cells["lost"] == "1"
    expectations = parse_expectations("delay_p50_ms<10,loss_pct<=5,lost==0,jitter_stdev_ms>1")
    failed = check_expectations(metrics, expectations)
    assert len(failed) == 4, failed
    for (name, _, _), line in zip(expectations, failed):
        got = line.rsplit(": got ", 1)[1]
        assert got == cells[name], (line, cells[name])
    assert failed[0] == "delay_p50_ms < 10: got 20.023"


def test_a_value_the_rounding_would_show_as_passing_is_also_given_unrounded() -> None:
    # loss_pct 8.0004 > 8 fails, but the table's 8.000 would read as meeting it.
    [line] = check_expectations({"loss_pct": 8.0004}, parse_expectations("loss_pct<=8"))
    assert line == "loss_pct <= 8: got 8.000 (8.0004)"
    [line] = check_expectations({"loss_pct": 8.2}, parse_expectations("loss_pct<=8"))
    assert line == "loss_pct <= 8: got 8.200"
    [line] = check_expectations({"delay_p50_ms": None}, parse_expectations("delay_p50_ms<10"))
    assert line == "delay_p50_ms < 10: got None"
    assert format_metric(None) == "" and format_metric(3) == "3" and format_metric(0.1234567) == "0.123"
