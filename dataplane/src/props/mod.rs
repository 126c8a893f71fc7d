//! Property tests (proptest) of the pure functions where a property is natural: the packet
//! parser, P4Runtime byte-string and table-entry decoding, the rate queue's arithmetic. Each
//! property holds for every generated input; proptest shrinks a failure to a minimal case.
//! Case counts are proptest's default (256) unless a property is cheap enough for more; the
//! whole set runs in a few seconds of `cargo test`.
mod p4rt;
mod parse;
mod rate;
mod trace;
