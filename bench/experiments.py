"""`make bench-experiments`: the parallel experiment runner against the serial one, in one run.

A fixed slow-link slice (E1's 42 KB HTML page fetched by one GET over the 28.8k modem, `--reps R`
loads of about 16 s that wait on the link, as most loads of the full studies do) runs three times
through the real CLI:

    serial         --parallel 1
    parallel       --parallel 3
    killed         --parallel 3, SIGKILL after a third of the loads are stored, then `resume`

and the figures are

    parallel_speedup_slow_links   wall time serial / parallel (bar >= 2.5)
    parallel_fidelity_pct         the largest difference of a condition's median page-load time
                                  between the serial and the parallel run, in % (bar <= 3)
    resume_redone_loads           loads started again by the resume: the attempts the killed run
                                  had in flight (bar <= the labs running when it was killed)

written to bench/results/experiments.json with the commands, wall times and machine load.

usage: .venv/bin/python bench/experiments.py [--reps R] [--out PATH]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P4NETEM = str(Path(sys.executable).parent / "p4netem")
PARALLEL = 3


def slice_args(reps: int) -> list[str]:
    return ["e1-microscape", "--quick", "--only", "profile=modem-28k8", "--only", "client=get",
            "--reps", str(reps), "--quiet"]


def run(args: list[str], out: Path) -> float:
    t0 = time.time()
    proc = subprocess.run([P4NETEM, "experiment", *args, "--out", str(out)], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "160"})
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                         f"\n{proc.stderr[-2000:]}")
    return time.time() - t0


def medians(out: Path) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for r in csv.DictReader(open(out / "runs.csv")):
        if r["ok"] == "True" and r["plt_ms"]:
            by.setdefault(r["key"], []).append(float(r["plt_ms"]))
    return {k: statistics.median(v) for k, v in by.items()}


def stored(out: Path) -> int:
    if not (out / "run.db").exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{out / 'run.db'}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute("SELECT count(*) FROM results").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def killed_and_resumed(args: list[str], out: Path, loads: int) -> dict:
    proc = subprocess.Popen([P4NETEM, "experiment", "run", *args, "--parallel", str(PARALLEL),
                             "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while stored(out) < max(1, loads // 3):
        if proc.poll() is not None:
            raise SystemExit("the run ended before it could be killed")
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at_kill = stored(out)
    time.sleep(1)
    t0 = time.time()
    res = subprocess.run([P4NETEM, "experiment", "resume", str(out), "--parallel", str(PARALLEL),
                          "--quiet"], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"resume failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    db = sqlite3.connect(out / "run.db")
    in_flight = db.execute("SELECT count(*) FROM attempts WHERE session = 1 AND outcome IS NULL"
                           ).fetchone()[0]
    redone = db.execute("SELECT count(DISTINCT a2.key) FROM attempts a1 JOIN attempts a2 "
                        "ON a1.key = a2.key WHERE a1.session = 1 AND a2.session = 2"
                        ).fetchone()[0]
    total, unique = db.execute("SELECT count(*), count(DISTINCT key) FROM results").fetchone()
    labs_at_kill = db.execute("SELECT labs FROM sessions WHERE id = 1").fetchone()[0]
    return {"stored_at_kill": at_kill, "in_flight_at_kill": in_flight, "redone": redone,
            "labs_at_kill": labs_at_kill, "rows": total, "unique_rows": unique,
            "resume_wall_s": round(time.time() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Each run pays a fixed cost (labs up: 8-16 s; the analysis: a few s) that the parallel run
    # cannot divide by 3: 24 loads keep it a small part of the serial run's ~7 minutes.
    ap.add_argument("--reps", type=int, default=24)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "experiments.json")
    a = ap.parse_args()
    args = slice_args(a.reps)
    work = Path(tempfile.mkdtemp(prefix="p4n-bench-exp-"))
    load0 = os.getloadavg()
    try:
        t_serial = run(["run", *args, "--parallel", "1"], work / "serial")
        t_par = run(["run", *args, "--parallel", str(PARALLEL)], work / "parallel")
        ms, mp = medians(work / "serial"), medians(work / "parallel")
        assert set(ms) == set(mp), (set(ms), set(mp))
        fidelity = max(abs(mp[k] - ms[k]) / ms[k] * 100 for k in ms)
        loads = sum(1 for _ in csv.DictReader(open(work / "serial" / "runs.csv")))
        kill = killed_and_resumed(args, work / "killed", loads)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = {
        "parallel_speedup_slow_links": round(t_serial / t_par, 2),
        "parallel_fidelity_pct": round(fidelity, 2),
        "resume_redone_loads": kill["redone"],
    }
    doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "slice": " ".join(args), "loads": loads,
           "parallel": PARALLEL, "serial_wall_s": round(t_serial, 1),
           "parallel_wall_s": round(t_par, 1), "median_plt_ms": {"serial": ms, "parallel": mp},
           "killed_run": kill, "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "cpus": os.cpu_count(), "figures": figures,
           "bars": {"parallel_speedup_slow_links": ">= 2.5", "parallel_fidelity_pct": "<= 3",
                    "resume_redone_loads": f"<= {kill['labs_at_kill']} (labs at the kill)"}}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    ok = (figures["parallel_speedup_slow_links"] >= 2.5 and figures["parallel_fidelity_pct"] <= 3
          and kill["redone"] <= kill["labs_at_kill"] and kill["rows"] == kill["unique_rows"] == loads)
    print(f"slice: {doc['slice']} ({loads} loads)")
    print(f"serial {t_serial:.1f} s, --parallel {PARALLEL} {t_par:.1f} s")
    for k, v in figures.items():
        print(f"{k:32} {v:>8}   bar {doc['bars'][k]}")
    print(f"killed run: {kill}")
    print(f"load average {load0[0]:.1f} -> {doc['loadavg_end'][0]:.1f} on {doc['cpus']} CPUs; "
          f"written to {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
