// SPDX-License-Identifier: MIT OR Apache-2.0
//! Varint and fixed-width decoding on arbitrary bytes: never panics, never reads past the input,
//! and whatever decodes re-encodes to a value that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::coding::{
    decode_varint32, decode_varint64, put_varint32, put_varint64, varint_length, Decoder,
};

fuzz_target!(|data: &[u8]| {
    if let Some((v, n)) = decode_varint64(data) {
        assert!(n <= data.len() && n <= 10);
        let mut buf = Vec::new();
        put_varint64(&mut buf, v);
        assert_eq!(buf.len(), varint_length(v));
        assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
    }
    if let Some((v, n)) = decode_varint32(data) {
        assert!(n <= data.len() && n <= 5);
        let mut buf = Vec::new();
        put_varint32(&mut buf, v);
        assert_eq!(decode_varint32(&buf), Some((v, buf.len())));
    }
    // A mixed stream of fields, as the MANIFEST and batch decoders read them.
    let mut d = Decoder::new(data);
    while !d.is_empty() {
        let before = d.position();
        let ok = match d.u8().map(|b| b % 5) {
            Some(0) => d.varint32().is_some(),
            Some(1) => d.varint64().is_some(),
            Some(2) => d.fixed32().is_some(),
            Some(3) => d.fixed64().is_some(),
            Some(_) => d.length_prefixed().is_some(),
            None => false,
        };
        assert!(d.position() <= data.len());
        if !ok || d.position() == before {
            break;
        }
    }
    let _ = strata::version::VersionEdit::decode(data);
});
