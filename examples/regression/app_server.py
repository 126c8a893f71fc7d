"""A small app to regression-test: an HTTP server whose /report returns ?bytes=N bytes after
--delay-ms of "work" (the knob a bad change turns)."""

import argparse
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    args = ap.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/report":
                time.sleep(args.delay_ms / 1000)
            size = int(parse_qs(url.query).get("bytes", ["2"])[0])
            body = b"x" * size
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a) -> None:
            pass

    ThreadingHTTPServer(("0.0.0.0", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
