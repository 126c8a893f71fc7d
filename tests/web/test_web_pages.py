"""Page models and generated files: the named pages match experiments.md, sizes are exact, files
are valid, generation is deterministic, and the HTML names every object on its own host."""

from __future__ import annotations

import re
import struct
import zlib

import pytest

from p4netem_studies.web import pages, payloads, site
from p4netem_studies.web.manifest import Manifest

KIB = 1024


def test_microscape_matches_e1():
    p = pages.microscape()
    sizes = [o.size for o in p.objects]
    assert p.html_size == 42 * KIB
    assert len(sizes) == 42 and all(o.kind == "gif" for o in p.objects)
    assert sum(sizes) == 125 * KIB
    assert min(sizes) == 70 and max(sizes) == 40 * KIB
    assert sum(s < 1024 for s in sizes) == 19
    assert sum(1024 <= s < 2048 for s in sizes) == 7
    assert sum(2048 <= s < 3072 for s in sizes) == 6
    assert len(p.hosts) == 1


def test_microscape_html_deflates_to_about_11_kb(tmp_path):
    m = site.generate(pages.microscape(), tmp_path)
    html = (tmp_path / m.root.host / "index.html").read_bytes()
    assert len(html) == 42 * KIB
    assert 10 * KIB <= len(zlib.compress(html, 6)) <= 12 * KIB


@pytest.mark.parametrize("servers", [1, 2, 4])
def test_e3_pages(servers):
    a, b, c = (pages.e3_page(x, servers) for x in "ABC")
    for p in (a, b, c):
        assert len(p.hosts) == servers
        counts = [sum(o.host == h for o in p.objects) for h in p.hosts]
        assert max(counts) - min(counts) <= 1          # split equally
    assert a.html_size == int(12.8 * KIB)
    assert [o.kind for o in a.objects].count("js") == 1
    imgs = [o.size for o in a.objects if o.kind != "js"]
    assert len(imgs) == 100 and min(imgs) >= int(1.3 * KIB) and max(imgs) <= int(5.5 * KIB)
    assert sum(imgs) / 100 == pytest.approx(2.6 * KIB, abs=1)
    bs = [o.size for o in b.objects]
    assert len(bs) == 100 and min(bs) == 46 and max(bs) == 103 * KIB
    assert sum(bs) / 100 == pytest.approx(14 * KIB, abs=1)
    assert len(c.objects) == 10 and all(290 * KIB <= o.size <= 310 * KIB for o in c.objects)


@pytest.mark.parametrize("index", range(1, len(pages.E5_SITES) + 1))
def test_e5_sites(index):
    domains, count, total_kb = pages.E5_SITES[index - 1]
    p = pages.e5_site(index)
    assert len(p.hosts) == domains
    assert p.object_count == count
    assert p.total_bytes == total_kb * KIB


def test_demo_page():
    p = pages.demo()
    assert len(p.objects) == 30 and len(p.hosts) == 2


def test_named_pages_all_build():
    for name in pages.NAMES:
        # Every page has embedded objects but E1's single GET, which is the HTML alone.
        assert pages.named(name).objects or name == "microscape-html"
    alone = pages.named("microscape-html")
    assert alone.html_size == pages.named("microscape").html_size and alone.object_count == 1
    with pytest.raises(ValueError, match="unknown page"):
        pages.named("nope")


def test_generation_is_deterministic_and_seeded(tmp_path):
    a = site.generate(pages.demo(), tmp_path / "a", seed=3)
    b = site.generate(pages.demo(), tmp_path / "b", seed=3)
    c = site.generate(pages.demo(), tmp_path / "c", seed=4)
    assert [e.sha256 for e in a.objects] == [e.sha256 for e in b.objects]
    assert [e.sha256 for e in a.objects] != [e.sha256 for e in c.objects]


def _check_gif(data: bytes) -> None:
    assert data[:6] == b"GIF89a" and data[-1:] == b";"
    w, h, flags = struct.unpack("<HHB", data[6:11])
    assert (w, h) == (1, 1)
    off = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    # Walk the blocks to the trailer: every block must be well formed.
    while data[off] != 0x3B:
        if data[off] == 0x21:          # extension: label then sub-blocks
            off += 2
        elif data[off] == 0x2C:        # image descriptor, LZW code size, sub-blocks
            off += 10 + 1
        else:
            raise AssertionError(f"bad GIF block 0x{data[off]:02x} at {off}")
        while data[off] != 0:
            off += data[off] + 1
        off += 1
    assert off == len(data) - 1


def _check_png(data: bytes) -> None:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    off, kinds, idat = 8, [], b""
    while off < len(data):
        (n,) = struct.unpack(">I", data[off:off + 4])
        kind, body = data[off + 4:off + 8], data[off + 8:off + 8 + n]
        (crc,) = struct.unpack(">I", data[off + 8 + n:off + 12 + n])
        assert crc == zlib.crc32(kind + body)
        kinds.append(kind)
        idat += body if kind == b"IDAT" else b""
        off += 12 + n
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
    width, height = struct.unpack(">II", data[16:24])
    assert len(zlib.decompress(idat)) == height * (1 + width)


@pytest.mark.parametrize("size", [35, 36, 38, 39, 40, 41, 46, 70, 290, 291, 1000, 40960, 300_000])
def test_gif_exact_and_valid(size):
    import random
    data = payloads.gif(size, random.Random(size))
    assert len(data) == size
    _check_gif(data)


@pytest.mark.parametrize("size", [70, 71, 500, 4165, 4166, 4200, 100_000])
def test_png_exact_and_valid(size):
    import random
    data = payloads.png(size, random.Random(size))
    assert len(data) == size
    _check_png(data)


def test_too_small_objects_are_refused():
    import random
    with pytest.raises(ValueError, match="GIF cannot be"):
        payloads.gif(20, random.Random(1))
    with pytest.raises(ValueError, match="PNG cannot be"):
        payloads.png(40, random.Random(1))
    with pytest.raises(ValueError, match="cannot hold"):
        payloads.html(100, "t", ["<img src=\"//a.test/x.gif\">"] * 10, random.Random(1))


def test_files_match_manifest_and_html_references_every_object(tmp_path):
    m = site.generate(pages.e3_page("A", servers=2), tmp_path, scheme="https")
    loaded = Manifest.load(tmp_path / "manifest.json")
    assert loaded == m
    html = (tmp_path / m.root.host / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs == [e.url for e in m.embedded]
    for e in m.objects:
        f = tmp_path / e.host / e.path.lstrip("/")
        assert f.stat().st_size == e.size
        assert e.url.startswith(f"https://{e.host}/")
        if e.content_type == "image/gif":
            _check_gif(f.read_bytes())
        elif e.content_type == "image/png":
            _check_png(f.read_bytes())
    assert "<script src=" in html


def test_fit_sizes_exact_and_bounded():
    s = pages.fit_sizes([1, 2, 3, 100], 1000, 10, 600)
    assert sum(s) == 1000 and all(10 <= x <= 600 for x in s)
    with pytest.raises(ValueError):
        pages.fit_sizes([1, 1], 10, 10, 20)
