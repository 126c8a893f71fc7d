"""Exceptions of the P4Runtime client. Every one carries a gRPC status code and a plain message.

Errors found locally (an unknown table name, a value wider than its field) use the status code the
server would have answered with (NOT_FOUND, OUT_OF_RANGE, INVALID_ARGUMENT), so callers handle one
kind of exception whichever side found the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from .proto import p4runtime_pb2, status_pb2


def status_code_from_int(value: int) -> grpc.StatusCode:
    """Map a canonical google.rpc.Code number to grpc.StatusCode (UNKNOWN if unrecognised)."""
    for code in grpc.StatusCode:
        if code.value[0] == value:
            return code
    return grpc.StatusCode.UNKNOWN


class P4RuntimeError(Exception):
    """A P4Runtime operation failed; `code` is the gRPC status code, `message` says why."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError, what: str) -> P4RuntimeError:
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        details = err.details() if hasattr(err, "details") else str(err)
        return cls(code or grpc.StatusCode.UNKNOWN, f"{what}: {details}")


@dataclass(frozen=True)
class UpdateError:
    """The outcome of one update of a batched Write that did not succeed."""

    index: int  # position of the update in the request
    code: grpc.StatusCode
    message: str


class WriteError(P4RuntimeError):
    """A Write failed; `errors` lists the updates that failed (the others were applied, unless the
    request asked for atomicity)."""

    def __init__(self, code: grpc.StatusCode, message: str, errors: list[UpdateError], *, detail: bool = True):
        """`detail`: append the first failed updates to the message (off when the caller has
        already written them into it)."""
        text = "; ".join(f"update {e.index}: {e.code.name}: {e.message}" for e in errors[:5]) if detail else ""
        more = f" (+{len(errors) - 5} more)" if detail and len(errors) > 5 else ""
        super().__init__(code, f"{message}{': ' + text if text else ''}{more}")
        self.errors = errors

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError, what: str) -> WriteError:
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        details = err.details() if hasattr(err, "details") else str(err)
        return cls(code or grpc.StatusCode.UNKNOWN, f"{what}: {details}", _update_errors(err))


def _update_errors(err: grpc.RpcError) -> list[UpdateError]:
    """Per-update errors of a failed Write: P4Runtime packs one p4.v1.Error per update into the
    google.rpc.Status sent as binary trailing metadata (spec section 12.3)."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        errors = []
        for index, detail in enumerate(status.details):
            one = p4runtime_pb2.Error()
            if not detail.Unpack(one):
                continue
            if one.canonical_code != 0:
                errors.append(UpdateError(index, status_code_from_int(one.canonical_code), one.message))
        return errors
    return []
