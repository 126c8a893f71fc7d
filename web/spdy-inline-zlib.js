'use strict';
// SPDY header blocks compressed and decompressed inline, in the thread that frames them.
//
// SPDY/3 compresses every SYN_STREAM / SYN_REPLY header block with one zlib context per
// direction and session, kept from block to block (Z_SYNC_FLUSH after each). The SPDY stacks
// the studies measured (Chromium, mod_spdy, nginx's spdy module) call deflate()/inflate() on
// that context inline, a few microseconds for a header block. spdy-transport does it through
// node's asynchronous zlib streams instead, one block at a time per session (its LockStream):
// every block is a trip through libuv's thread pool and back (a futex wake of a pool thread,
// then an eventfd wake of the event loop), and the blocks of requests that arrive together wait
// for each other's trips. On a busy 2-core machine each wake waits for a CPU, so a response
// left the server milliseconds after its request arrived (docs/labs.md), time the studies'
// servers did not spend. This module gives spdy-transport's framer and parser the same zlib
// contexts (same dictionary, window and level, so the bytes on the wire are unchanged) coded
// synchronously.
//
// Node has no public synchronous call on a zlib stream that keeps its context (zlib.*Sync()
// close theirs), so this calls the stream's own handle the way node's zlib.js does for its
// *Sync functions (handle.writeSync, results in _writeState). When a node release lacks those,
// install() leaves spdy-transport's asynchronous path in place and says so once on stderr.

const zlib = require('zlib');
const transport = require('spdy-transport');

const SYNC_FLUSH = zlib.constants.Z_SYNC_FLUSH;
const OUT = 64 * 1024;

function inlineCapable(stream) {
  return !!(stream && stream._handle && typeof stream._handle.writeSync === 'function'
    && stream._writeState && stream._writeState.length >= 2);
}

// One header block through the stream's zlib context, flushed (Z_SYNC_FLUSH) as spdy-transport
// flushes it; returns the output bytes.
function codeBlock(stream, input, scratch) {
  const handle = stream._handle;
  const state = stream._writeState;
  const parts = [];
  let inOff = 0;
  let inLen = input.length;
  for (;;) {
    handle.writeSync(SYNC_FLUSH, input, inOff, inLen, scratch, 0, scratch.length);
    if (stream.destroyed) throw stream.errored || new Error('SPDY header block: zlib error');
    const outLeft = state[0];
    const inLeft = state[1];
    const n = scratch.length - outLeft;
    if (n > 0) parts.push(Buffer.from(scratch.subarray(0, n)));
    inOff += inLen - inLeft;
    inLen = inLeft;
    // zlib stops early only when the output buffer is full; otherwise the block is done.
    if (outLeft !== 0) break;
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

// Stands where spdy-transport puts its LockStream: write(chunks, callback(err, chunks)).
// The callback runs before write() returns; every caller in spdy-transport holds its stream
// (cork) or its parser until the callback, so the order of frames is the same as before.
class InlineCoder {
  constructor(stream) {
    this.stream = stream;
    this.scratch = Buffer.allocUnsafe(OUT);
    // A zlib error destroys the stream, which then emits 'error'; it reaches spdy-transport
    // through write()'s callback (a protocol error on the session), so the event needs a
    // listener or it would end the process.
    stream.on('error', () => {});
  }

  write(chunks, callback) {
    let out;
    try {
      out = codeBlock(this.stream, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks),
        this.scratch);
    } catch (err) {
      callback(err);
      return;
    }
    callback(null, [out]);
  }
}

let installed = false;

function install() {
  if (installed) return;
  installed = true;
  const { Framer, Parser } = transport.protocol.base;
  const asyncFramer = Framer.prototype.setCompression;
  const asyncParser = Parser.prototype.setCompression;
  let warned = false;
  const fallback = () => {
    if (!warned) process.stderr.write('spdy-inline-zlib: this node has no synchronous zlib handle; header blocks go through the thread pool\n');
    warned = true;
  };
  Framer.prototype.setCompression = function setCompression(pair) {
    if (!inlineCapable(pair.compress)) { fallback(); return asyncFramer.call(this, pair); }
    this.compress = new InlineCoder(pair.compress);
    return undefined;
  };
  Parser.prototype.setCompression = function setCompression(pair) {
    if (!inlineCapable(pair.decompress)) { fallback(); return asyncParser.call(this, pair); }
    this.decompress = new InlineCoder(pair.decompress);
    return undefined;
  };
}

module.exports = { install, InlineCoder, codeBlock };
