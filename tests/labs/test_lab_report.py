"""`p4netem experiment report` on a real run: a slice of E5's quick variant (HTTP/2 over TLS on
idle HSPA, pre-woken HSPA and idle LTE, two loads each, through the real switch with the radio
model on; one lab, since the test is of the report, not of parallel runs, and one lab is the
quickest on a busy machine), its report written twice, then opened in real headless Chromium
with the network cut off: every table and plot must be there and decoded, nothing may be
fetched, and the claims the slice can test must come out as the radio model makes them (the
1.8 s HSPA promotion shows in the first SYN-ACK and leaves the page load when the radio is
pre-woken)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
P4NETEM = str(Path(sys.executable).parent / "p4netem")
CHECK = Path(__file__).with_name("report_offline.js")


def _p4netem(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([P4NETEM, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


def test_report_of_a_real_run_is_complete_and_offline(e5_h2_slice, tmp_path):
    out, proc, _ = e5_h2_slice        # conftest.py: the run of the docstring
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    rep = _p4netem("experiment", "report", str(out), timeout=300)
    assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-3000:]
    page = out / "report.html"
    assert str(page) in rep.stdout
    first = page.read_bytes()
    # Seeded: the same files give the same page, byte for byte. Written beside it (--out) while
    # Chromium reads the first: the two share nothing but the result files, which both only read.
    second = tmp_path / "report-again.html"
    again = subprocess.Popen([P4NETEM, "experiment", "report", str(out), "--out", str(second)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "COLUMNS": "200"})
    try:
        html = first.decode()
        # Nothing in the file points outside it: every src/href is a data: URI or an anchor, no
        # script, no CSS import or url().
        refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html)
        assert refs and all(r.startswith(("data:", "#")) for r in refs), refs[:5]
        assert "<script" not in html and "@import" not in html and "url(" not in html

        shot = tmp_path / "report.png"
        node = subprocess.run(["node", str(CHECK), str(page), str(shot)], capture_output=True,
                              text=True, timeout=180,
                              env={**os.environ, "NODE_PATH": str(REPO / "web" / "node_modules")})
        again_out, again_err = again.communicate(timeout=300)
    finally:
        if again.poll() is None:
            again.kill()
            again.communicate()
    assert again.returncode == 0, again_out[-3000:] + again_err[-3000:]
    assert second.read_bytes() == first
    assert page.read_bytes() == first
    assert node.returncode == 0, node.stderr[-3000:]
    seen = json.loads(node.stdout)
    assert seen["external"] == [] and seen["requests"] == [page.as_uri()], seen["requests"]
    assert shot.stat().st_size > 50_000                    # the page rendered, at full length

    tables: dict[str, list[dict]] = {}
    for t in seen["tables"]:
        tables.setdefault(t["cls"], []).append(t)
    # Medians with intervals: a header and one row per condition (3 networks x h2).
    [medians] = tables["intervals"]
    assert medians["rows"] == 1 + 3
    [analysis] = tables["analysis"]
    assert analysis["rows"] == 1 + 3 and analysis["cells"] > 3 * 10
    assert tables["environment"][0]["rows"] >= 10 and tables["tcp"][0]["rows"] >= 10
    assert all(t["rows"] >= 2 for t in tables["checks"])
    # The study's plot (PNG) and one forest plot per tested claim (SVG), all embedded, decoded.
    images = seen["images"]
    assert all(i["scheme"] == "data" and i["ok"] and i["width"] > 300 for i in images), images
    assert [i["mime"] for i in images if "study-plot" in i["cls"]] == ["image/png"]
    assert len([i for i in images if "claim-plot" in i["cls"]]) == len(tables["checks"]) == 3

    # E5's claims in the report's order: HSPA wake-up, pre-waking, LTE, GPRS (not in the slice).
    verdicts = seen["verdicts"]
    assert len(verdicts) == 4
    assert verdicts[0] == "agrees" and verdicts[1] == "agrees", verdicts
    assert verdicts[3] == "not measured"
    assert "Against the original study" in seen["headings"] and "Environment" in seen["headings"]
    # How it ran: every planned load stored (3 conditions x 2), none failed.
    assert "<th>loads</th><td>6 of 6 stored, 0 failed</td>" in html
    # The run's kernel and congestion control (the definition's, as the hosts reported it).
    cc = json.loads((out / "experiment.json").read_text())["definition"]["congestion_control"]
    assert os.uname().release in html
    assert re.search(rf"<td>congestion_control_requested</td>(<td>{cc}</td>)+</tr>", html), cc
