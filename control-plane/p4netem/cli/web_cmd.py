"""`p4netem web`: the dashboard, the REST API and /metrics against a running switch."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Optional

import typer

from ..control.primary_wait import MAX_WEB_WAIT_S, WEB_WAIT_S
from .common import DEFAULT_ADDR, DeviceId, ElectionId, SwitchAddr, console, guarded, warning


def _split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter(f"{listen!r} is not HOST:PORT with PORT in 1..65535", param_hint="'--listen'")
    return host.strip("[]") or "127.0.0.1", int(port)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@guarded
def web(
    listen: Annotated[str, typer.Option(
        "--listen", metavar="HOST:PORT",
        help="Where the page and the API listen. 0.0.0.0:8080 lets phones and laptops on the client side "
             "shape their own traffic (with --token, only the operator may touch other rules).")] = "127.0.0.1:8080",
    token: Annotated[Optional[str], typer.Option(
        "--token", envvar="P4NETEM_WEB_TOKEN",
        help="Operator token (env P4NETEM_WEB_TOKEN): needed for everything but the profile list and "
             "self-service shaping; sent as 'Authorization: Bearer TOKEN' or opened once as /?token=TOKEN.")] = None,
    refresh: Annotated[float, typer.Option(
        "--refresh", min=0.1, max=60.0, metavar="SECONDS", help="Period of the live plots (0.1..60 s).")] = 1.0,
    switch_metrics: Annotated[Optional[str], typer.Option(
        "--switch-metrics", metavar="URL",
        help="The switch's own health metrics (p4netem-switch --metrics-addr), e.g. "
             "http://127.0.0.1:9560/metrics: re-exported on /metrics and summarized on /api/health.")] = None,
    primary_wait: Annotated[float, typer.Option(
        "--primary-wait", envvar="P4NETEM_WEB_PRIMARY_WAIT", metavar="SECONDS", min=0.0, max=MAX_WEB_WAIT_S,
        help="How long a write waits for the primary role while another live controller holds it (a CLI "
             "command writing) before it answers 409; 0: at once (env P4NETEM_WEB_PRIMARY_WAIT; the global "
             "--primary-wait is the CLI's own).")] = WEB_WAIT_S,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Serve the dashboard, the REST API (OpenAPI at /docs) and Prometheus /metrics.

    Reads go through a read-only connection. Writes are primary (--election-id) only while they write.
    Stops on Ctrl-C. docs/web.md describes the page and every endpoint."""
    import uvicorn

    from ..p4rt import GrpcTls
    from ..webapp import WebSettings, create_app

    host, port = _split_listen(listen)
    if not _loopback(host) and not token:
        warning(f"--listen {listen} without --token: anyone who reaches the page may change every rule")
    settings = WebSettings(switch=addr, device_id=device_id, election_id=election_id, tls=GrpcTls.from_env(),
                           token=token, refresh_s=refresh, switch_metrics=switch_metrics,
                           primary_wait_s=primary_wait)
    app = create_app(settings)
    console.print(f"p4netem web on http://{listen}/ (API docs /docs, metrics /metrics) for switch {addr}",
                  highlight=False)
    # proxy_headers off: uvicorn would otherwise take X-Forwarded-For from a local client as the
    # caller's address, and self-service shapes the caller's own address (a local user could
    # then shape, or stop shaping, anyone's traffic).
    uvicorn.run(app, host=host, port=port, log_level="warning", proxy_headers=False)


def register(app: typer.Typer) -> None:
    app.command("web")(web)
