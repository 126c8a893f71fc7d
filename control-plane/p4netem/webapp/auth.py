"""Who may do what. Without a token (the default, for a web server on loopback) every request is
an operator's. With `--token`, a request is an operator's when it carries the token (header
`Authorization: Bearer TOKEN`, or the `p4netem_token` cookie the page sets after `?token=`);
other requests may only read the profile library and shape their own traffic (/api/self), as
ATC users do from a phone on the client side."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

COOKIE = "p4netem_token"


class Access:
    def __init__(self, token: str | None):
        self.token = token or None

    def is_operator(self, request: Request) -> bool:
        if self.token is None:
            return True
        given = ""
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            given = header[7:].strip()
        given = given or request.cookies.get(COOKIE, "") or request.query_params.get("token", "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    def require_operator(self, request: Request) -> None:
        if not self.is_operator(request):
            raise HTTPException(status_code=401, detail="this needs the operator token (Authorization: Bearer TOKEN)",
                                headers={"WWW-Authenticate": "Bearer"})
