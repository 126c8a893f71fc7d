"""nginx as the lab's HTTP/1.0, HTTP/1.1 and HTTP/2 server, configured per run inside a namespace.

One server carries any of the page's hosts: the document root is `<content>/$host`. Everything the
run writes (config, pid, logs, temp paths) is in a private directory removed on stop, so nothing of
the system nginx is touched. The access log is JSON with nginx's own view of each request:
connection number, requests on that connection, whether it was pipelined ($pipe), protocol and
ALPN, which tests and labs read back.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .pki import ServerCert
from .server_process import ServerProcess

NGINX = "/usr/sbin/nginx"
MIME_TYPES = "/etc/nginx/mime.types"


@dataclass(frozen=True)
class NginxConfig:
    content_root: Path
    http_port: int | None = 80        # plain HTTP/1.0 and 1.1
    https_port: int | None = None     # TLS; offers h2 by ALPN when h2 is set
    h2c_port: int | None = None       # plain HTTP/2 with prior knowledge (no Upgrade in nginx)
    h2: bool = True
    keepalive: bool = True            # off: every response closes its connection (HTTP/1.0 server)
    keepalive_requests: int = 100000  # high, so a page never hits nginx's default of 1000
    keepalive_timeout_s: int = 65
    # nginx's send_timeout (default 60 s): a response (an HTTP/2 stream) that cannot be written
    # for this long is abandoned, a stream reset with PROTOCOL_ERROR. On the labs' slow or lossy
    # links one connection carrying 64-512 objects keeps a stream waiting longer than that while
    # the connection is busy, so page-load labs raise it to the load's own timeout.
    send_timeout_s: int = 60
    gzip: bool = False                # deflate-encode HTML/CSS/JS for clients that accept it (E1)
    gzip_level: int = 6
    tls_protocols: str = "TLSv1.2 TLSv1.3"
    session_resumption: bool = False  # experiments load with a cold cache and new connections
    h2_max_concurrent_streams: int = 256
    workers: int = 1
    listen_address: str = ""          # "" = every address of the namespace
    # Nagle and sendfile: the lab's servers send every response without waiting for an ACK
    # (docs/labs.md "Nagle, corking and output buffering"). Both switches exist to put the stalls
    # back on purpose (the RTT audit's tests): tcp_nodelay=False is nginx's `tcp_nodelay off`
    # (Nagle on every connection); h2c_sendfile=True is nginx's default sendfile path on the h2c
    # port, which corks each DATA burst with Nagle back on and so holds its last partial segment
    # until the client's ACK of an earlier small one, a round trip later.
    tcp_nodelay: bool = True
    h2c_sendfile: bool = False
    # Workers run as this user. Root by default: labs run as root and generate content under
    # private temp dirs (mode 0700) that nginx's usual www-data could not read.
    user: str = "root"

    def ports(self) -> list[int]:
        return [p for p in (self.http_port, self.https_port, self.h2c_port) if p]


def _listen(addr: str, port: int, *flags: str) -> str:
    where = f"{addr}:{port}" if addr else str(port)
    return f"listen {where}{''.join(' ' + f for f in flags if f)};"


def render(config: NginxConfig, workdir: Path, cert: ServerCert | None) -> str:
    """The nginx.conf text for one run."""
    if config.https_port and cert is None:
        raise ValueError("https_port needs a server certificate")
    if not config.ports():
        raise ValueError("nginx needs at least one of http_port, https_port, h2c_port")
    root = Path(config.content_root).resolve()
    listens = []
    if config.http_port:
        listens.append(_listen(config.listen_address, config.http_port))
    if config.https_port:
        listens.append(_listen(config.listen_address, config.https_port, "ssl",
                               "http2" if config.h2 else ""))
    h2c_server = ""
    tls = ""
    if cert is not None and config.https_port:
        resumption = "on" if config.session_resumption else "off"
        cache = "shared:p4n:1m" if config.session_resumption else "off"
        tls = f"""
        ssl_certificate {cert.cert};
        ssl_certificate_key {cert.key};
        ssl_protocols {config.tls_protocols};
        ssl_session_cache {cache};
        ssl_session_tickets {resumption};"""
    site = f"""
        root {root}/$host;
        location / {{ try_files $uri =404; }}"""
    if config.h2c_port:
        # A separate server block: on nginx 1.22 a plain `http2` listener speaks only HTTP/2.
        # sendfile off there: nginx's HTTP/2 output on a plain connection goes through the Linux
        # sendfile chain of the connection itself, which sets TCP_CORK around each DATA burst
        # and, since CORK and NODELAY exclude each other there, turns TCP_NODELAY off first
        # (`tcp_nopush off` does not reach it: it applies to the stream's fake connection).
        # After the uncork NODELAY stays off, so the burst's last partial segment waits under
        # Nagle (Minshall) for the ACK of the small HEADERS segment before it: one RTT per
        # burst, seen in captures and straces (docs/labs.md). With sendfile off the frames are
        # written from memory with writev and NODELAY, as over TLS.
        sendfile = "" if config.h2c_sendfile else "\n        sendfile off;"
        h2c_server = f"""
    server {{
        {_listen(config.listen_address, config.h2c_port, "http2")}
        server_name _;{sendfile}{site}
    }}"""
    keepalive = (f"keepalive_timeout {config.keepalive_timeout_s}s;\n"
                 f"    keepalive_requests {config.keepalive_requests};" if config.keepalive
                 else "keepalive_timeout 0;")
    gzip = (f"gzip on;\n    gzip_comp_level {config.gzip_level};\n    gzip_min_length 256;\n"
            "    gzip_http_version 1.0;\n    gzip_vary on;\n"
            "    gzip_types text/css application/javascript;" if config.gzip else "gzip off;")
    return f"""# generated by p4netem_studies.web.nginx for one run; removed when the server stops
user {config.user};
worker_processes {config.workers};
pid {workdir}/nginx.pid;
error_log {workdir}/error.log info;
daemon off;
master_process on;
events {{ worker_connections 4096; }}
http {{
    include {MIME_TYPES};
    default_type application/octet-stream;
    log_format p4n escape=json '{{"msec":$msec,"conn":$connection,"conn_req":$connection_requests,'
        '"pipe":"$pipe","proto":"$server_protocol","scheme":"$scheme","alpn":"$ssl_alpn_protocol",'
        '"tls":"$ssl_protocol","host":"$host","uri":"$request_uri","status":$status,'
        '"body_bytes":$body_bytes_sent,"bytes":$bytes_sent,"request_time":$request_time,'
        '"remote":"$remote_addr:$remote_port","server_port":$server_port}}';
    access_log {workdir}/access.log p4n;
    client_body_temp_path {workdir}/client_body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    server_tokens off;
    sendfile on;
    tcp_nopush off;
    tcp_nodelay {'on' if config.tcp_nodelay else 'off'};
    etag on;
    if_modified_since exact;
    {keepalive}
    send_timeout {config.send_timeout_s}s;
    {gzip}
    http2_max_concurrent_streams {config.h2_max_concurrent_streams};
    server {{
        {chr(10).join('        ' + line if i else line for i, line in enumerate(listens))}
        server_name _;{tls}{site}
    }}{h2c_server}
}}
"""


class NginxServer(ServerProcess):
    """nginx running in namespace `ns` until stop(); usable as a context manager."""

    prefix = "p4nw-nginx-"
    kept_files = ("access.log", "error.log", "nginx.conf")

    def __init__(self, ns: str | None, config: NginxConfig, cert: ServerCert | None = None,
                 workdir: str | Path | None = None):
        super().__init__(ns, workdir)
        self.config = config
        self.cert = cert

    @property
    def access_log(self) -> Path:
        return self.request_log

    @property
    def error_log(self) -> Path:
        return self.workdir / "error.log"

    @property
    def conf(self) -> Path:
        return self.workdir / "nginx.conf"

    def prepare(self) -> None:
        self.conf.write_text(render(self.config, self.workdir, self.cert))
        test = subprocess.run([NGINX, "-t", "-q", "-p", str(self.workdir), "-e",
                               str(self.error_log), "-c", str(self.conf)], capture_output=True, text=True)
        if test.returncode != 0:
            raise RuntimeError(f"nginx rejected its config: {test.stderr.strip()}")

    def argv(self) -> list[str]:
        return [NGINX, "-p", str(self.workdir), "-e", str(self.error_log), "-c", str(self.conf)]

    def ports(self) -> list[int]:
        return self.config.ports()

    def version_info(self) -> str:
        return subprocess.run([NGINX, "-v"], capture_output=True, text=True).stderr.strip()
