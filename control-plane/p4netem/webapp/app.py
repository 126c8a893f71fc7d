"""The FastAPI application of `p4netem web`: REST API, /metrics, the live stream and the page."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..control.primary_wait import WEB_WAIT_S
from ..control.readback import SwitchStats
from ..control.session import NotPrimaryError
from ..p4rt import GrpcTls, P4RuntimeError
from ..profiles import ProfileError
from ..profiles.errors import Problem
from .api import TimelineRunner, build_router, problems_of
from .auth import COOKIE, Access
from ..switch_health import HealthUnavailable, SwitchHealth, stall_message
from .metrics import Metrics
from .session import RETRY_S, SWITCH_GONE, BusyError, SwitchSession


@dataclass
class WebSettings:
    switch: str = "127.0.0.1:9559"
    device_id: int = 1
    election_id: int = 1
    tls: GrpcTls | None = None
    token: str | None = None
    refresh_s: float = 1.0  # the live stream's period (the page's plots scroll at this step)
    switch_metrics: str | None = None  # the switch's --metrics-addr URL (its own health)
    primary_wait_s: float = WEB_WAIT_S  # how long a write waits for the primary role


def static_dir() -> Path:
    """The dashboard's files: index.html and app.js here, the npm libraries under vendor/ (copied
    there by scripts/setup-web.sh from web/node_modules at build time: never from a CDN)."""
    return Path(str(resources.files("p4netem.webapp") / "static"))


def live_payload(stats: SwitchStats, sent: list) -> dict:
    """One event of the live stream: every row when the rows changed (`full`), else only the rows
    whose counters moved since the rows `sent` (an unchanged row is the same object, see
    control/stats_poller.py): with 1000 idle rules an event is a few rows, not 800 kB of JSON."""
    d = {"parser_errors": {e.name.lower(): n for e, n in stats.parser_errors.items()},
         "radio": stats.radio.to_dict()}
    full = len(sent) != len(stats.rows) or any(
        a.label != b.label or a.direction != b.direction or a.profile != b.profile for a, b in zip(sent, stats.rows))
    rows = stats.rows if full else [r for r, old in zip(stats.rows, sent) if r is not old]
    return {"full": full, "rows": [r.to_dict() for r in rows], **d}


# The largest request body read: four times the largest YAML document read (16 Mi characters,
# safe_yaml), room for JSON's escapes. Larger bodies are 413 before they are read into memory.
MAX_BODY_BYTES = 64 << 20


class BodyLimit:
    """ASGI middleware: a request body over MAX_BODY_BYTES is refused (413), by its Content-Length
    before anything is read, or once the bytes streamed in (chunked) pass the limit."""

    def __init__(self, app, limit: int = MAX_BODY_BYTES):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            response = JSONResponse(status_code=413, content={"error": self._message(int(length))})
            return await response(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # FastAPI passes an HTTPException raised while it reads the body on as it is.
                    raise HTTPException(413, self._message(seen))
            return message

        await self.app(scope, limited, send)

    def _message(self, n: int) -> str:
        return f"request body of {n} bytes or more; at most {self.limit} are read"


def switch_unavailable(exc: P4RuntimeError) -> bool:
    """The switch is down, or did not answer in time (not: it refused the request)."""
    return exc.code in SWITCH_GONE


def switch_error(address: str, exc: P4RuntimeError) -> JSONResponse:
    """A switch that cannot be reached: 503 {"error", "code", "problems"} (Retry-After: when the
    web server tries it again, session.py). One that refused the request: 502 {"error", "code"}."""
    if switch_unavailable(exc):
        message = f"switch {address} unavailable: {exc.code.name}: {exc.message}"
        return JSONResponse(status_code=503, headers={"Retry-After": str(math.ceil(RETRY_S))}, content={
            "error": message, "code": exc.code.name,
            "problems": [{"path": "switch", "message": f"{exc.code.name}: {exc.message}"}]})
    return JSONResponse(status_code=502, content={"error": f"switch {address}: {exc.code.name}: {exc.message}",
                                                  "code": exc.code.name})


def _validation_problems(exc: RequestValidationError) -> list[Problem]:
    """FastAPI's own checks of a request (not JSON, not an object, a field missing, unknown or
    of the wrong type) as the validator's problems: a field path and a message."""
    out = []
    for e in exc.errors():
        loc = list(e.get("loc", ()))
        if loc and loc[0] in ("body", "query", "path", "header"):
            loc = loc[1:]
        kind = e.get("type", "")
        if kind == "json_invalid":
            out.append(Problem("", f"not valid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}"
                                   + (f" (character {loc[0]})" if loc and isinstance(loc[0], int) else "")))
            continue
        path = ""
        for part in loc:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        if kind == "model_attributes_type" and not path:
            message = "expected a JSON object (Content-Type: application/json)"
        elif kind == "extra_forbidden":
            message = "unknown field"
        else:
            message = str(e.get("msg", "invalid"))
        out.append(Problem(path, message))
    return out


def create_app(settings: WebSettings, session: SwitchSession | None = None) -> FastAPI:
    session = session or SwitchSession(settings.switch, device_id=settings.device_id,
                                       election_id=settings.election_id, tls=settings.tls,
                                       stats_max_age_s=min(0.4, settings.refresh_s / 2),
                                       primary_wait_s=settings.primary_wait_s)
    access = Access(settings.token)
    timelines = TimelineRunner()
    app = FastAPI(title="p4netem", version="0.1.0",
                  description="REST API of the p4netem network emulator: profiles, rules, counters, "
                              "radio, timelines, self-service shaping (docs/web.md).")
    app.state.session = session
    app.state.timelines = timelines

    @app.exception_handler(ProfileError)
    async def _profile_error(request: Request, exc: ProfileError):
        # Bad input (a profile, rule or timeline): the validator's field-named problems.
        return JSONResponse(status_code=422, content={"error": str(exc), "problems": problems_of(exc)})

    @app.exception_handler(RequestValidationError)
    async def _request_error(request: Request, exc: RequestValidationError):
        # Not JSON, not an object, a field missing, unknown or of the wrong type: the same shape.
        problems = _validation_problems(exc) or [Problem("", "invalid request")]
        error = ProfileError(problems)
        return JSONResponse(status_code=422, content={"error": str(error), "problems": problems_of(error)})

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        # 401, 404, 405, 413: {"error": ...} as every other error of the API.
        return JSONResponse(status_code=exc.status_code, content={"error": str(exc.detail)},
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(P4RuntimeError)
    async def _switch_error(request: Request, exc: P4RuntimeError):
        return switch_error(session.address, exc)

    @app.exception_handler(NotPrimaryError)
    async def _not_primary(request: Request, exc: NotPrimaryError):
        # Another controller writes at this moment (or holds our election id): the web's write is
        # refused, nothing was written, and it can be tried again once that controller is done.
        return JSONResponse(status_code=409, content={"error": f"switch {session.address}: {exc.message}",
                                                      "code": exc.code.name, "election_id": exc.holder})

    @app.exception_handler(BusyError)
    async def _busy(request: Request, exc: BusyError):
        return JSONResponse(status_code=409, content={"error": str(exc)})

    app.add_middleware(BodyLimit)
    health = SwitchHealth(settings.switch_metrics) if settings.switch_metrics else None
    app.include_router(build_router(session, access, timelines, health=health is not None))
    metrics = Metrics(session, health)
    metrics_lock = threading.Lock()  # one scrape at a time: the row cache is not thread-safe

    @app.get("/metrics", include_in_schema=False)
    def metrics_text(request: Request) -> Response:
        access.require_operator(request)
        with metrics_lock:
            return Response(metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/api/health", summary="The switch's own health: whether its data plane runs, data-plane "
                                     "busy fraction, ring drops, buffers, P4Runtime latency (needs --switch-metrics)")
    def switch_health(request: Request) -> JSONResponse:
        access.require_operator(request)
        if health is None:
            return JSONResponse(status_code=404, content={
                "error": "no switch metrics: start the switch with --metrics-addr HOST:PORT and "
                         "p4netem web with --switch-metrics http://HOST:PORT/metrics"})
        try:
            summary = health.summary()
        except HealthUnavailable as exc:
            return JSONResponse(status_code=503, headers={"Retry-After": "1"}, content={
                "error": str(exc), "problems": [{"path": "switch_metrics", "message": str(exc)}]})
        stalled = stall_message(summary["dataplane"])
        if stalled is None:
            return JSONResponse(summary)
        # A stalled data plane forwards nothing while P4Runtime and the metrics answer: unhealthy
        # as a switch whose health cannot be read (503, for a load balancer's or a probe's check),
        # with every figure all the same.
        return JSONResponse(status_code=503, headers={"Retry-After": "1"}, content={
            "error": stalled, "problems": [{"path": "dataplane", "message": stalled}], **summary})

    @app.get("/api/live", summary="Server-sent events: the stats every refresh period")
    async def live(request: Request) -> StreamingResponse:
        access.require_operator(request)

        async def events():
            next_t = time.monotonic()
            sent: list = []  # the rows this client has, as sent
            while not await request.is_disconnected():
                try:
                    stats = await run_in_threadpool(session.stats)
                    payload = {"t": time.time(), **live_payload(stats, sent)}
                    sent = stats.rows
                except P4RuntimeError as exc:
                    payload = {"t": time.time(), "error": f"{exc.code.name}: {exc.message}", "code": exc.code.name,
                               "unavailable": switch_unavailable(exc)}
                    sent = []
                yield f"data: {json.dumps(payload)}\n\n"
                # A read that took longer than the period (a switch that does not answer, 1000
                # rules) stretches the period: no burst of events to catch up afterwards; after
                # an error, the next try is a whole period later.
                now = time.monotonic()
                next_t = now + settings.refresh_s if "error" in payload else max(next_t + settings.refresh_s, now)
                await asyncio.sleep(next_t - time.monotonic())

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    @app.get("/", include_in_schema=False)
    def index(request: Request) -> Response:
        response = FileResponse(static_dir() / "index.html")
        token = request.query_params.get("token")
        if token and settings.token and access.is_operator(request):
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response

    app.mount("/static", StaticFiles(directory=static_dir(), check_dir=False), name="static")

    @app.on_event("shutdown")
    def _close() -> None:
        timelines.stop_event.set()
        session.close()

    return app
