"""Bytes of web objects with an exact size: GIF, PNG, JavaScript, CSS and HTML.

Experiments fix object sizes to the byte (E1's 70 B GIF, E3's 46 B image), and loaders check every
object's size, so each generator hits the requested length exactly while producing a file a browser
accepts (valid image headers, parseable script). Image padding is random bytes so images stay as
incompressible as real ones; text is drawn from a word list so HTML deflates like real markup
(E1's 42 KB page deflates to about 11 KB). Every generator takes a `random.Random` so a seed decides
the bytes.
"""

from __future__ import annotations

import random
import struct
import zlib

# A GIF89a with a 1x1 image and a 2-colour global colour table is this long; smaller GIFs do not exist.
_GIF_SCREEN = struct.pack("<HHBBB", 1, 1, 0x80, 0, 0)  # 1x1, GCT present with 2 entries
_GIF_SCREEN_NO_GCT = struct.pack("<HHBBB", 1, 1, 0x00, 0, 0)
_GIF_GCT = b"\x00\x00\x00\xff\xff\xff"
# Image descriptor (1x1 at 0,0) then LZW min code size 2 and one 2-byte sub-block: clear, 0, end.
_GIF_IMAGE = b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00"
_GIF_TRAILER = b"\x3b"
GIF_MIN_SIZE = len(b"GIF89a" + _GIF_SCREEN_NO_GCT + _GIF_IMAGE + _GIF_TRAILER) + 5


def _gif_comment(n: int, rng: random.Random) -> bytes:
    """A GIF comment extension of exactly n bytes (n == 0 or n >= 5)."""
    if n == 0:
        return b""
    if n < 5:
        raise ValueError(f"a GIF comment extension cannot be {n} bytes")
    out = bytearray(b"\x21\xfe")
    remaining = n - 3  # introducer, label and the zero-length terminator block
    while remaining > 0:
        # A sub-block is a length byte plus 1..255 data bytes; never leave exactly one byte over.
        if remaining <= 256:
            take = remaining - 1
        else:
            take = 254 if remaining - 256 == 1 else 255
        out.append(take)
        out += rng.randbytes(take)
        remaining -= take + 1
    out.append(0)
    assert len(out) == n
    return bytes(out)


def gif(size: int, rng: random.Random) -> bytes:
    """A valid GIF89a of exactly `size` bytes (1x1 image padded with a comment extension)."""
    with_gct = b"GIF89a" + _GIF_SCREEN + _GIF_GCT + _GIF_IMAGE
    pad = size - len(with_gct) - 1
    if pad == 0 or pad >= 5:
        head = with_gct
    else:
        # 1..4 bytes over the smallest GIF with a colour table: drop the table (decoders then use
        # a default palette) so the comment can be at least 5 bytes.
        head = b"GIF89a" + _GIF_SCREEN_NO_GCT + _GIF_IMAGE
        pad = size - len(head) - 1
        if pad < 5:
            raise ValueError(f"a GIF cannot be {size} bytes (minimum {GIF_MIN_SIZE})")
    data = head + _gif_comment(pad, rng) + _GIF_TRAILER
    assert len(data) == size
    return data


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# Signature, IHDR, IDAT framing, IEND, one filter byte and the zlib/stored-block framing.
_PNG_FIXED = 8 + 25 + 12 + 12 + 1 + 2 + 5 + 4
PNG_MIN_SIZE = _PNG_FIXED + 1
_PNG_MAX_WIDTH = 4096


def png(size: int, rng: random.Random) -> bytes:
    """A valid PNG of exactly `size` bytes: one grey row stored uncompressed, plus a padding chunk.

    The row width absorbs sizes up to a few KB exactly; larger files add a private ancillary chunk
    (type `pdDg`, ignored by decoders) of random bytes.
    """
    if size < PNG_MIN_SIZE:
        raise ValueError(f"a PNG cannot be {size} bytes (minimum {PNG_MIN_SIZE})")
    width = size - _PNG_FIXED
    pad = 0
    if width > _PNG_MAX_WIDTH:
        width = _PNG_MAX_WIDTH
        pad = size - _PNG_FIXED - width
        if pad < 12:  # a chunk needs 12 bytes of framing: narrow the row to make room
            width -= 12
            pad += 12
    row = b"\x00" + rng.randbytes(width)
    stored = b"\x01" + struct.pack("<HH", len(row), len(row) ^ 0xFFFF) + row  # final stored block
    idat = b"\x78\x01" + stored + struct.pack(">I", zlib.adler32(row))
    ihdr = struct.pack(">IIBBBBB", width, 1, 8, 0, 0, 0, 0)
    parts = [b"\x89PNG\r\n\x1a\n", _png_chunk(b"IHDR", ihdr), _png_chunk(b"IDAT", idat)]
    if pad:
        parts.append(_png_chunk(b"pdDg", rng.randbytes(pad - 12)))
    parts.append(_png_chunk(b"IEND", b""))
    data = b"".join(parts)
    assert len(data) == size, (len(data), size)
    return data


# Word list for text: about 120 distinct tokens makes markup deflate to roughly a quarter of its size.
_SYLLABLES = ["ka", "lo", "mi", "ne", "ra", "ti", "so", "vu", "pe", "da", "gri", "fan", "tor", "bel",
              "shu", "wen", "cor", "lix", "mar", "pon"]


def _vocabulary(rng: random.Random, n: int = 120) -> list[str]:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))))
    return sorted(words)


def text(size: int, rng: random.Random, vocab: list[str] | None = None) -> str:
    """Exactly `size` characters of word-like ASCII text with sentences and spaces."""
    vocab = vocab or _vocabulary(rng)
    out: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(vocab)
        sep = ". " if rng.random() < 0.08 else " "
        piece = word + sep
        out.append(piece)
        n += len(piece)
    return "".join(out)[:size]


def script(size: int, rng: random.Random) -> bytes:
    """JavaScript of exactly `size` bytes: variable declarations and a trailing comment."""
    head = "/* p4netem synthetic script */\n"
    if size < len(head) + 3:
        raise ValueError(f"a script cannot be {size} bytes (minimum {len(head) + 3})")
    vocab = _vocabulary(rng, 120)
    body = [head]
    n = len(head)
    i = 0
    while True:
        line = f'var p4n_{i} = "{text(rng.randint(20, 70), rng, vocab).strip()}";\n'
        if n + len(line) + 3 > size:
            break
        body.append(line)
        n += len(line)
        i += 1
    tail_len = size - n  # >= 3: "//" + filler + "\n"
    body.append("//" + "x" * (tail_len - 3) + "\n")
    data = "".join(body).encode("ascii")
    assert len(data) == size
    return data


def stylesheet(size: int, rng: random.Random) -> bytes:
    """CSS of exactly `size` bytes: class rules and a trailing comment."""
    head = "/* p4netem synthetic stylesheet */\n"
    if size < len(head) + 4:
        raise ValueError(f"a stylesheet cannot be {size} bytes (minimum {len(head) + 4})")
    body = [head]
    n = len(head)
    i = 0
    while True:
        rule = (f".p4n-{i} {{ margin: {rng.randint(0, 20)}px; color: #{rng.randrange(1 << 24):06x}; "
                f"width: {rng.randint(10, 900)}px; }}\n")
        if n + len(rule) + 4 > size:
            break
        body.append(rule)
        n += len(rule)
        i += 1
    pad = size - n  # >= 4: "/*" + filler + "*/" would need 4; use "/*" + x* + "*/" minus newline
    body.append("/*" + "x" * (pad - 4) + "*/")
    data = "".join(body).encode("ascii")
    assert len(data) == size
    return data


def html(size: int, title: str, references: list[str], rng: random.Random) -> bytes:
    """An HTML document of exactly `size` bytes whose body interleaves `references` with text.

    `references` are complete tags (img, script, link). They are spread evenly through the body, as
    inlined images are through a real page, so a client that parses the page while it arrives
    discovers them progressively (what makes E1's pipelining flush policy matter).
    """
    head = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n"
            "<body>\n")
    tail = "\n</body></html>\n"
    fixed = len(head) + len(tail) + sum(len(r) + 1 for r in references)
    filler = size - fixed
    if filler < 0:
        raise ValueError(f"HTML of {size} bytes cannot hold {len(references)} references "
                         f"(needs at least {fixed} bytes)")
    vocab = _vocabulary(rng)
    slots = len(references) + 1
    shares = [filler // slots] * slots
    shares[-1] += filler - sum(shares)
    parts = [head]
    for i, share in enumerate(shares):
        chunk = text(share, rng, vocab)
        if share >= 8:
            # Wrap filler in paragraphs where it fits, keeping the exact length.
            chunk = "<p>" + chunk[: share - 8] + "</p>\n"
        parts.append(chunk)
        if i < len(references):
            parts.append(references[i] + "\n")
    parts.append(tail)
    data = "".join(parts).encode("ascii")
    assert len(data) == size, (len(data), size)
    return data
