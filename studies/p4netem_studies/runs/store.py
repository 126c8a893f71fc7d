"""The durable result store of a run: one SQLite file, `run.db`, in the run directory.

Why SQLite in WAL mode: it is in Python's standard library (nothing to install on a cluster
node or a user's laptop that only analyses), a commit is atomic and durable the moment it
returns (`synchronous=FULL`: a power cut after the commit keeps the row), a reader (`experiment
status` while the run goes on) never blocks the writer, and the file is one self-describing
artefact that `sqlite3` opens. Only the driver writes; labs and Ray workers send their results to
it, so there is one writer and no locking between machines.

Tables:
  meta      key -> JSON: the definition, the identity (code, machine TCP), the plan's summary
  jobs      the plan, written before the first load: one row per condition x repetition with a
            stable key, its shard (loads that share a lab setup), order and random seeds
  results   one row per finished load (PRIMARY KEY key: a load is never stored twice)
  attempts  every start of a load on a lab, and how it ended (a lab that died, a retry)
  files     files a load produced (kept pcaps), relative to the run directory
  labs      each lab that ran: where, with which switch options, its metadata (software, TCP)
  sessions  each run or resume of the directory: start, end, how it ended
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (key TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE,
    shard TEXT NOT NULL, seeds TEXT NOT NULL, spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY REFERENCES jobs(key), ok INTEGER NOT NULL,
    record TEXT NOT NULL, lab TEXT NOT NULL, session INTEGER NOT NULL, attempt INTEGER NOT NULL,
    t_end REAL NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,
    lab TEXT NOT NULL, session INTEGER NOT NULL, t_start REAL NOT NULL, t_end REAL,
    outcome TEXT, error TEXT);
CREATE TABLE IF NOT EXISTS files (key TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL,
    PRIMARY KEY (key, name));
CREATE TABLE IF NOT EXISTS labs (id TEXT PRIMARY KEY, session INTEGER NOT NULL, node TEXT,
    t_up REAL, metadata TEXT);
CREATE TABLE IF NOT EXISTS sessions (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
    t_start REAL NOT NULL, t_end REAL, outcome TEXT, labs INTEGER, command TEXT);
"""

DB_NAME = "run.db"


class StoreError(Exception):
    pass


def damaged(path: Path, exc: Exception) -> str:
    """The one-line error for a run store SQLite cannot read (truncated, overwritten)."""
    return (f"{path}: the run store is damaged ({exc}); `sqlite3 {path} .recover` may save "
            "what it holds")


@dataclass(frozen=True)
class Job:
    key: str
    seq: int
    shard: str
    seeds: dict
    spec: dict


@dataclass(frozen=True)
class StoredResult:
    key: str
    ok: bool
    record: dict
    lab: str
    session: int
    attempt: int
    t_end: float


class RunStore:
    """`RunStore.create(dir)` for a new run, `RunStore.open(dir)` for an existing one."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                  check_same_thread=False)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:    # truncated or overwritten: not a store any more
            self.db.close()
            raise StoreError(damaged(self.path, exc)) from None

    @classmethod
    def create(cls, directory: Path) -> "RunStore":
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / DB_NAME
        if path.exists():
            raise StoreError(f"{directory} already holds a run ({DB_NAME}); resume it with "
                             f"`p4netem experiment resume {directory}` or choose another --out")
        store = cls(path)
        store.db.executescript(SCHEMA)
        return store

    @classmethod
    def open(cls, directory: Path) -> "RunStore":
        path = Path(directory) / DB_NAME
        if not path.exists():
            raise StoreError(f"{directory}: no run store ({DB_NAME}) here; is it the --out of "
                             "an `experiment run`?")
        store = cls(path)
        # An empty or cut file opens as a database without the store's tables: say so here, once,
        # rather than as an OperationalError from whichever query of whichever command comes first.
        tables = {row[0] for row in store.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = sorted(set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA)) - tables)
        if missing:
            store.close()
            raise StoreError(damaged(path, f"no table {', '.join(missing)}"))
        return store

    @staticmethod
    def exists(directory: Path) -> bool:
        return (Path(directory) / DB_NAME).exists()

    def close(self) -> None:
        self.db.close()

    # ---- meta and plan ---------------------------------------------------------------------------
    def set_meta(self, key: str, value) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, default=str)))

    def meta(self, key: str, default=None):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def write_plan(self, jobs: list[Job]) -> None:
        """The whole plan in one transaction, before the first load."""
        with self._tx():
            self.db.executemany("INSERT INTO jobs VALUES (?, ?, ?, ?, ?)",
                                [(j.key, j.seq, j.shard, json.dumps(j.seeds), json.dumps(j.spec))
                                 for j in jobs])

    def jobs(self) -> list[Job]:
        return [Job(k, seq, shard, json.loads(seeds), json.loads(spec)) for k, seq, shard, seeds, spec
                in self.db.execute("SELECT key, seq, shard, seeds, spec FROM jobs ORDER BY seq")]

    # ---- results ---------------------------------------------------------------------------------
    def add_result(self, key: str, ok: bool, record: dict, lab: str, session: int, attempt: int,
                   files: dict[str, str] | None = None) -> bool:
        """Commit a finished load (and its files) at once. False if the key is already stored
        (a load that a lost lab had finished after all): the first result stands."""
        try:
            with self._tx():
                self.db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
                                (key, int(ok), json.dumps(record, default=str), lab, session,
                                 attempt, time.time()))
                for name, path in (files or {}).items():
                    self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", (key, name, path))
        except sqlite3.IntegrityError:
            return False
        return True

    def set_aside_failed(self) -> list[str]:
        """Take the failed loads out of the results so that a resume runs them again (`resume
        --retry-failed`), in one transaction: each one's stored attempt becomes outcome
        'failed-retried' with its errors, and its whole record is kept in the meta table
        ('set_aside_<time>'), so nothing of what happened is lost."""
        with self._tx():
            rows = self.db.execute("SELECT key, record, attempt FROM results WHERE ok = 0 "
                                   "ORDER BY key").fetchall()
            if not rows:
                return []
            for key, record, attempt in rows:
                errors = json.loads(record).get("errors")
                self.db.execute("UPDATE attempts SET outcome = 'failed-retried', error = ? "
                                "WHERE id = ?", (json.dumps(errors, default=str)[:2000], attempt))
                self.db.execute("DELETE FROM files WHERE key = ?", (key,))
                self.db.execute("DELETE FROM results WHERE key = ?", (key,))
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            (f"set_aside_{time.time():.3f}",
                             json.dumps([{"key": k, "record": json.loads(r)} for k, r, _ in rows],
                                        default=str)))
        return [k for k, _, _ in rows]

    def refail(self, updated: dict[str, dict], reason: str) -> None:
        """Turn stored ok loads into failed ones with these records (`experiment recheck`: a check
        that did not exist when they were stored refuses them), in one transaction; every original
        record is kept in the meta table ('rechecked_<time>', with `reason`), so nothing is lost
        and `resume --retry-failed` runs them again."""
        if not updated:
            return
        with self._tx():
            originals = []
            for key, record in updated.items():
                row = self.db.execute("SELECT record FROM results WHERE key = ? AND ok = 1",
                                      (key,)).fetchone()
                if row is None:
                    raise StoreError(f"{key}: not a stored ok load")
                originals.append({"key": key, "record": json.loads(row[0])})
                self.db.execute("UPDATE results SET ok = 0, record = ? WHERE key = ?",
                                (json.dumps(record, default=str), key))
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            (f"rechecked_{time.time():.3f}",
                             json.dumps({"reason": reason, "loads": originals}, default=str)))

    def done_keys(self) -> set[str]:
        return {k for (k,) in self.db.execute("SELECT key FROM results")}

    def results(self) -> list[StoredResult]:
        """Every stored load in plan order."""
        rows = self.db.execute(
            "SELECT r.key, r.ok, r.record, r.lab, r.session, r.attempt, r.t_end FROM results r "
            "JOIN jobs j ON j.key = r.key ORDER BY j.seq")
        return [StoredResult(k, bool(ok), json.loads(rec), lab, s, a, t)
                for k, ok, rec, lab, s, a, t in rows]

    def files(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for key, name, path in self.db.execute("SELECT key, name, path FROM files"):
            out.setdefault(key, {})[name] = path
        return out

    # ---- attempts, labs, sessions ----------------------------------------------------------------
    def start_attempt(self, key: str, lab: str, session: int) -> int:
        cur = self.db.execute("INSERT INTO attempts (key, lab, session, t_start) VALUES (?, ?, ?, ?)",
                              (key, lab, session, time.time()))
        return int(cur.lastrowid)

    def end_attempt(self, attempt: int, outcome: str, error: str | None = None) -> None:
        self.db.execute("UPDATE attempts SET t_end = ?, outcome = ? , error = ? WHERE id = ?",
                        (time.time(), outcome, error, attempt))

    def attempts(self, key: str | None = None) -> list[dict]:
        sql = "SELECT id, key, lab, session, t_start, t_end, outcome, error FROM attempts"
        args: tuple = ()
        if key is not None:
            sql += " WHERE key = ?"
            args = (key,)
        cols = ("id", "key", "lab", "session", "t_start", "t_end", "outcome", "error")
        return [dict(zip(cols, r)) for r in self.db.execute(sql + " ORDER BY id", args)]

    def add_lab(self, lab: str, session: int, node: str | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO labs (id, session, node, t_up) VALUES (?, ?, ?, ?)",
                        (lab, session, node, time.time()))

    def set_lab_metadata(self, lab: str, metadata: dict) -> None:
        self.db.execute("UPDATE labs SET metadata = ? WHERE id = ?",
                        (json.dumps(metadata, default=str), lab))

    def labs(self) -> list[dict]:
        cols = ("id", "session", "node", "t_up", "metadata")
        out = []
        for r in self.db.execute(f"SELECT {', '.join(cols)} FROM labs ORDER BY t_up"):
            d = dict(zip(cols, r))
            d["metadata"] = json.loads(d["metadata"]) if d["metadata"] else None
            out.append(d)
        return out

    def begin_session(self, kind: str, command: str, labs: int) -> int:
        cur = self.db.execute("INSERT INTO sessions (kind, t_start, labs, command) VALUES (?, ?, ?, ?)",
                              (kind, time.time(), labs, command))
        return int(cur.lastrowid)

    def end_session(self, session: int, outcome: str) -> None:
        self.db.execute("UPDATE sessions SET t_end = ?, outcome = ? WHERE id = ?",
                        (time.time(), outcome, session))

    def last_activity(self, session: int) -> float | None:
        """The last moment the store heard from `session`: its start, a load started or ended,
        a result stored, a lab up. What a session killed outright (no t_end) lasted until."""
        row = self.db.execute(
            "SELECT MAX(t) FROM ("
            " SELECT t_start AS t FROM sessions WHERE id = ?1"
            " UNION ALL SELECT MAX(t_start, COALESCE(t_end, t_start)) FROM attempts"
            "  WHERE session = ?1"
            " UNION ALL SELECT t_end FROM results WHERE session = ?1"
            " UNION ALL SELECT t_up FROM labs WHERE session = ?1)", (session,)).fetchone()
        return None if row is None else row[0]

    def close_killed_sessions(self) -> list[int]:
        """Sessions left open by a driver that was killed (no t_end): each ends at its last
        activity with outcome 'killed' (the loads it had in flight keep their open attempts:
        started, never ended). Only for a caller that holds the run's lock (execute.run_lock):
        then no other driver runs, and every open session is a dead one."""
        with self._tx():
            ids = [i for (i,) in self.db.execute("SELECT id FROM sessions WHERE t_end IS NULL")]
            for sid in ids:
                self.db.execute("UPDATE sessions SET t_end = ?, outcome = 'killed' WHERE id = ?",
                                (self.last_activity(sid), sid))
        return ids

    def sessions(self) -> list[dict]:
        cols = ("id", "kind", "t_start", "t_end", "outcome", "labs", "command")
        return [dict(zip(cols, r)) for r in
                self.db.execute(f"SELECT {', '.join(cols)} FROM sessions ORDER BY id")]

    def _tx(self):
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        return False
