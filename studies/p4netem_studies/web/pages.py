"""Web pages as data: which objects a page has, their sizes, kinds and host names.

A `PageModel` is a plain description (no files); `p4netem_studies.web.site.generate` turns one into real
files and a manifest. Named pages reproduce the pages of experiments.md (E1 Microscape, E3 A/B/C,
E5 multi-domain replicas, the demo page of `make run`); `uniform` gives the N-objects-of-size-S pages
of E4. Sizes are drawn from a seeded generator, so a (page, seed) pair always yields the same sizes.

Host names use the reserved `.test` top-level domain (RFC 6761) so they can never leak to a real
resolver; the lab maps them to namespace addresses.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

KIB = 1024

# Kind -> (directory, extension, content type, manifest type)
KINDS = {
    "html": ("", "html", "text/html", "html"),
    "gif": ("img", "gif", "image/gif", "image"),
    "png": ("img", "png", "image/png", "image"),
    "js": ("js", "js", "application/javascript", "script"),
    "css": ("css", "css", "text/css", "stylesheet"),
}


@dataclass(frozen=True)
class ObjectModel:
    """One embedded object: where it lives, what it is and exactly how many bytes it has."""

    host: str
    kind: str
    size: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.kind == "html":
            raise ValueError(f"object kind must be one of gif, png, js, css, not {self.kind!r}")
        if self.size <= 0:
            raise ValueError(f"object size must be positive, not {self.size}")


@dataclass(frozen=True)
class PageModel:
    """A page: one HTML document on `html_host` plus embedded objects, in document order."""

    name: str
    html_host: str
    html_size: int
    objects: tuple[ObjectModel, ...]
    description: str = ""
    hosts: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        hosts = [self.html_host] + [o.host for o in self.objects]
        object.__setattr__(self, "hosts", tuple(dict.fromkeys(hosts)))

    @property
    def total_bytes(self) -> int:
        return self.html_size + sum(o.size for o in self.objects)

    @property
    def object_count(self) -> int:
        """Objects including the HTML document, as experiments.md counts them."""
        return 1 + len(self.objects)


def fit_sizes(raw: list[float], total: int, lo: int, hi: int) -> list[int]:
    """Scale `raw` weights to integers in [lo, hi] that add up to exactly `total`.

    Clamped values are fixed and the rest rescaled until stable, then the rounding remainder is
    spread one byte at a time over values with room, so the shape of `raw` is kept.
    """
    n = len(raw)
    if n == 0:
        if total:
            raise ValueError(f"no objects to hold {total} bytes")
        return []
    if n * lo > total or n * hi < total:
        raise ValueError(f"{n} sizes in [{lo}, {hi}] cannot add up to {total}")
    fixed: dict[int, float] = {}
    values = [float(r) for r in raw]
    for _ in range(100):
        free = [i for i in range(n) if i not in fixed]
        budget = total - sum(fixed.values())
        weight = sum(raw[i] for i in free)
        scale = budget / weight if weight > 0 else 0.0
        changed = False
        for i in free:
            v = raw[i] * scale if weight > 0 else budget / len(free)
            if v < lo or v > hi:
                fixed[i] = float(min(max(v, lo), hi))
                changed = True
            values[i] = v
        for i, v in fixed.items():
            values[i] = v
        if not changed:
            break
    sizes = [min(max(int(v), lo), hi) for v in values]
    diff = total - sum(sizes)
    i = 0
    while diff != 0:
        step = 1 if diff > 0 else -1
        idx = i % n
        if lo <= sizes[idx] + step <= hi:
            sizes[idx] += step
            diff -= step
        i += 1
    return sizes


def _spread(items: list, hosts: list[str]) -> list[str]:
    """Host for each item, round-robin: 'split equally' over servers as in E3."""
    return [hosts[i % len(hosts)] for i in range(len(items))]


def uniform(n: int, size: int, *, hosts: int = 1, kind: str = "gif", html_size: int | None = None,
            domain: str | None = None) -> PageModel:
    """N objects of S bytes each (E4), split round-robin over `hosts` host names.

    Host names are the page's own (s1.n8-s1000.uniform.test): pages share one content tree, so
    two uniform pages on one host name would overwrite each other's index.html."""
    if n < 0:
        raise ValueError(f"object count must be >= 0, not {n}")
    domain = domain or f"n{n}-s{size}.uniform.test"
    names = [f"s{i + 1}.{domain}" for i in range(hosts)]
    # Room for every reference (an <img> tag is about 70 bytes plus its host name).
    hsize = html_size if html_size is not None else max(1 * KIB,
                                                        200 + (70 + len(names[0])) * n)
    objs = tuple(ObjectModel(h, kind, size) for h in _spread(list(range(n)), names))
    return PageModel(f"uniform-{n}x{size}", names[0], hsize, objs,
                     f"{n} objects of {size} B on {hosts} host(s)")


def microscape(seed: int = 1, domain: str = "microscape.test") -> PageModel:
    """E1: 42 KB HTML + 42 GIFs totalling 125 KB: 19 under 1 KB, 7 of 1-2 KB, 6 of 2-3 KB, the rest
    up to 40 KB, smallest 70 B and largest 40 KB; one server."""
    rng = random.Random(f"microscape/{seed}")
    small = [rng.randint(71, 1023) for _ in range(18)] + [70]
    one_k = [rng.randint(1024, 2047) for _ in range(7)]
    two_k = [rng.randint(2048, 3071) for _ in range(6)]
    rest_total = 125 * KIB - sum(small) - sum(one_k) - sum(two_k) - 40 * KIB
    big = fit_sizes([math.exp(rng.uniform(math.log(3 * KIB), math.log(20 * KIB))) for _ in range(9)],
                    rest_total, 3 * KIB, 40 * KIB) + [40 * KIB]
    sizes = small + one_k + two_k + big
    rng.shuffle(sizes)
    host = f"www.{domain}"
    return PageModel("microscape", host, 42 * KIB, tuple(ObjectModel(host, "gif", s) for s in sizes),
                     "E1 Microscape: 42 KB HTML, 42 GIFs totalling 125 KB")


def microscape_html(domain: str = "microscape.test") -> PageModel:
    """E1's single GET: an HTML document of Microscape's 42 KB that references nothing, so a load
    is that one request (plain vs deflated over the modem). Its text is drawn like every page's
    and deflates about as well (42 KB -> about 11 KB)."""
    # Its own host name: pages share one content tree, and Microscape's /index.html on
    # www.<domain> is another document.
    return PageModel("microscape-html", f"html.{domain}", 42 * KIB, (),
                     "E1 single GET: the 42 KB Microscape HTML alone")


def e3_page(which: str, servers: int = 1, seed: int = 1) -> PageModel:
    """E3 pages A, B, C served from 1, 2 or 4 servers, objects split equally."""
    which = which.upper()
    if servers not in (1, 2, 4):
        raise ValueError(f"E3 pages use 1, 2 or 4 servers, not {servers}")
    rng = random.Random(f"e3-{which}/{seed}")
    # Per server count: the 1-, 2- and 4-server versions of a page are different pages (their
    # bytes differ) and must not write each other's files in the shared content tree.
    domain = f"e3{which.lower()}{servers}.test"
    names = [f"s{i + 1}.{domain}" for i in range(servers)]
    objs: list[tuple[str, int]]
    if which == "A":
        # 1 script of 94.5 KB + 100 images of 1.3-5.5 KB, mean 2.6 KB (skewed toward small).
        lo, hi = int(1.3 * KIB), int(5.5 * KIB)
        imgs = fit_sizes([rng.betavariate(1.5, 4.0) * (hi - lo) + lo for _ in range(100)],
                         int(2.6 * KIB * 100), lo, hi)
        objs = [("js", int(94.5 * KIB))] + [("png" if i % 3 else "gif", s) for i, s in enumerate(imgs)]
        html_size = int(12.8 * KIB)
    elif which == "B":
        # 100 images of 46 B to 103 KB, mean 14 KB, roughly log-uniform.
        lo, hi = 46, 103 * KIB
        raw = [math.exp(rng.uniform(math.log(lo), math.log(hi))) for _ in range(98)]
        imgs = fit_sizes(raw, 14 * KIB * 100 - lo - hi, lo, hi) + [lo, hi]
        rng.shuffle(imgs)
        objs = [("gif" if s < 70 or i % 2 else "png", s) for i, s in enumerate(imgs)]
        objs = [("gif", s) if s < 70 else (k, s) for k, s in objs]
        html_size = int(8.2 * KIB)
    elif which == "C":
        objs = [("png", 300 * KIB + rng.randint(-4 * KIB, 4 * KIB)) for _ in range(10)]
        html_size = int(0.8 * KIB)
    else:
        raise ValueError(f"E3 pages are A, B and C, not {which!r}")
    hosts = _spread(objs, names)
    return PageModel(f"e3-{which.lower()}-{servers}s", names[0], html_size,
                     tuple(ObjectModel(h, k, s) for h, (k, s) in zip(hosts, objs)),
                     f"E3 page {which} on {servers} server(s)")


# E5 synthetic replicas: (domains, objects including the HTML, total KB).
E5_SITES = [(2, 7, 12), (3, 15, 145), (5, 16, 100), (1, 15, 85), (5, 16, 94), (8, 82, 564),
            (13, 82, 1200), (22, 160, 842)]


def _zipf_hosts(n: int, names: list[str], rng: random.Random) -> list[str]:
    """Each domain gets at least one object; the rest lean toward the first domains, as on real
    sites where the origin and a CDN carry most objects and trackers carry one or two."""
    hosts = list(names)
    weights = [1.0 / (i + 1) for i in range(len(names))]
    hosts += rng.choices(names, weights=weights, k=n - len(names))
    first, rest = hosts[: len(names)], hosts[len(names):]
    merged = rest + first
    rng.shuffle(merged)
    return merged


def e5_site(index: int, seed: int = 1) -> PageModel:
    """E5 site replica `index` (1-based) of E5_SITES: domains / objects / total size as measured."""
    if not 1 <= index <= len(E5_SITES):
        raise ValueError(f"E5 sites are 1..{len(E5_SITES)}, not {index}")
    domains, count, total_kb = E5_SITES[index - 1]
    rng = random.Random(f"e5-{index}/{seed}")
    total = total_kb * KIB
    if count - 1 < domains:
        raise ValueError(f"site {index}: {count} objects cannot cover {domains} domains")
    html_size = min(max(int(total * 0.12), 2 * KIB), 60 * KIB)
    n = count - 1
    kinds = rng.choices(["gif", "png", "js", "css"], weights=[35, 30, 25, 10], k=n)
    raw = [math.exp(rng.gauss(0, 1.1)) * (2.5 if k == "js" else 1.0) for k in kinds]
    sizes = fit_sizes(raw, total - html_size, 128, 400 * KIB)
    names = [f"www.site{index}.test"] + [f"d{i}.site{index}.test" for i in range(1, domains)]
    hosts = _zipf_hosts(n, names, rng) if domains > 1 else [names[0]] * n
    return PageModel(f"e5-site{index}", names[0], html_size,
                     tuple(ObjectModel(h, k, s) for h, k, s in zip(hosts, kinds, sizes)),
                     f"E5 replica {index}: {domains} domains, {count} objects, {total_kb} KB")


def demo(seed: int = 1) -> PageModel:
    """The `make run` page: 8 KB HTML and 30 objects (56 KB: images, scripts, stylesheets of
    150 B to 12 KB) over two host names, 64 KB in all: small enough that a GPRS load (60 kbit/s)
    takes about 10 s rather than a minute, large enough that the initial window shows on LTE."""
    rng = random.Random(f"demo/{seed}")
    kinds = ["gif"] * 10 + ["png"] * 10 + ["js"] * 6 + ["css"] * 4
    rng.shuffle(kinds)
    raw = [math.exp(rng.gauss(0, 1.0)) for _ in kinds]
    sizes = fit_sizes(raw, 56 * KIB, 150, 12 * KIB)
    names = ["www.demo.test", "static.demo.test"]
    return PageModel("demo", names[0], 8 * KIB,
                     tuple(ObjectModel(h, k, s) for h, k, s in zip(_spread(kinds, names), kinds, sizes)),
                     "make run demo: 30 objects over 2 host names, 64 KB")


def named(name: str, seed: int = 1) -> PageModel:
    """Page by name: microscape, e3-a|b|c[-Ns], e5-siteK, demo, uniform-NxS."""
    key = name.lower()
    if key == "microscape":
        return microscape(seed)
    if key == "microscape-html":
        return microscape_html()
    if key == "demo":
        return demo(seed)
    # The numbered forms by pattern, so that a malformed one ('uniform-5', 'e5-site') gets
    # this message rather than Python's own about unpacking or int().
    if m := re.fullmatch(r"e3-([a-z]+)(?:-([0-9]+)s?)?", key):
        return e3_page(m[1], int(m[2]) if m[2] else 1, seed)
    if m := re.fullmatch(r"e5-site([0-9]+)", key):
        return e5_site(int(m[1]), seed)
    if m := re.fullmatch(r"uniform-([0-9]+)x([0-9]+)", key):
        return uniform(int(m[1]), int(m[2]))
    raise ValueError(f"unknown page {name!r}: use microscape, microscape-html, demo, e3-a|b|c[-1s|2s|4s], "
                     f"e5-site1..{len(E5_SITES)}, uniform-NxS (N objects of S bytes)")


NAMES = (["microscape", "microscape-html", "demo"] + [f"e3-{p}-{s}s" for p in "abc" for s in (1, 2, 4)]
         + [f"e5-site{i}" for i in range(1, len(E5_SITES) + 1)])
