"""The appliance's web face: a REST API (OpenAPI at /docs and /openapi.json), Prometheus metrics
(/metrics), live stats over server-sent events and the dashboard page, all served by `p4netem web`
against a running switch. Every action goes through p4netem.control.Controller, the code the CLI
uses. See docs/web.md."""

from .app import WebSettings, create_app

__all__ = ["WebSettings", "create_app"]
