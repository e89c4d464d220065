//! What each fuzz target checks on one input, in one place: the cargo-fuzz
//! targets (`fuzz/fuzz_targets/*.rs`) are one line each calling these, and
//! the corpus replay test of the main workspace (`tests/fuzz_corpora.rs`)
//! includes this file and runs every committed corpus file through them on
//! stable Rust, without libFuzzer.
//!
//! Each function panics when the code under test breaks one of its
//! promises (an error answer to bad input is fine); a panic, an overflow
//! (fuzz builds keep debug assertions) or a sanitizer report is a bug.

use air_operators::graph::Partial;
use air_operators::sources::nexmark::Bid;
use air_operators::sources::text::Word;
use air_operators::sources::ysb::{
    format_uuid, parse_json_line, parse_json_line_with, write_json_line, AdType, Campaigns,
    ParseMode, YsbEvent, UUID_LEN,
};
use air_runtime::ExchangeData;
use air_shm::frame::{check_frame, FrameCheck};
use air_shm::{frame_size, FRAME_ALIGN, FRAME_HEADER};
use std::fmt::Debug;

/// `frame_header`: [`check_frame`], the network tier's receive-side check
/// of a frame header. Input: bytes 0..16 the header, then the read offset,
/// the data area size, the bytes published and the expected sequence
/// number as u64 LE (missing bytes are 0). Checked twice: with the raw
/// numbers (any numbers get an answer, never a panic or an overflow), and
/// at a valid position of a valid ring derived from them (64 bytes to
/// 1 MiB). An accepted frame or padding must lie inside the data area and
/// inside the bytes published.
pub fn frame_header(data: &[u8]) {
    let mut raw = [0u8; FRAME_HEADER + 32];
    let n = data.len().min(raw.len());
    raw[..n].copy_from_slice(&data[..n]);
    let header: [u8; FRAME_HEADER] = raw[..FRAME_HEADER].try_into().unwrap_or_default();
    let word = |i: usize| {
        let at = FRAME_HEADER + 8 * i;
        u64::from_le_bytes(raw[at..at + 8].try_into().unwrap_or_default())
    };
    let (offset, cap, published, seq) = (word(0), word(1), word(2), word(3));
    let check = |offset: usize, cap: usize, published: usize| match check_frame(
        &header, offset, cap, published, seq,
    ) {
        Ok(FrameCheck::Padding { skip }) => {
            assert!(skip >= FRAME_HEADER && skip == cap - offset && skip <= published);
        }
        Ok(FrameCheck::Frame { kind, len, size }) => {
            assert_eq!(header[4], kind as u8);
            assert_eq!(
                u32::from_le_bytes(raw[..4].try_into().unwrap_or_default()) as usize,
                len
            );
            assert_eq!(
                u64::from_le_bytes(raw[8..16].try_into().unwrap_or_default()),
                seq
            );
            assert!(size == frame_size(len) && size % FRAME_ALIGN == 0);
            assert!(offset + size <= cap && size <= published);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    };
    check(offset as usize, cap as usize, published as usize);
    let cap = FRAME_ALIGN * (4 + (cap % 65_533) as usize);
    let offset = FRAME_ALIGN * (offset % (cap / FRAME_ALIGN) as u64) as usize;
    let published = (published % (cap as u64 + 1)) as usize;
    check(offset, cap, published);
}

/// `ysb_json`: [`parse_json_line`] and [`parse_json_line_with`] in both
/// [`ParseMode`]s on one line. An event accepted in full mode writes
/// ([`write_json_line`]) and parses back to itself, and query-fields mode
/// accepts the line too with the same three fields; an event accepted in
/// query-fields mode has the documented defaults in the other fields.
pub fn ysb_json(data: &[u8]) {
    let full = parse_json_line(data);
    let query = parse_json_line_with(data, ParseMode::QueryFields);
    let reparsed = |ev: &YsbEvent| {
        let mut line = Vec::new();
        write_json_line(ev, &mut line);
        assert_eq!(parse_json_line(&line).as_ref(), Ok(ev));
    };
    match (&full, &query) {
        (Ok(ev), Ok(q)) => {
            reparsed(ev);
            assert_eq!(
                (q.ad_id, q.event_type, q.event_time_ms),
                (ev.ad_id, ev.event_type, ev.event_time_ms)
            );
        }
        (Ok(ev), Err(e)) => panic!("{ev:?} valid in full mode, not for the query fields: {e}"),
        (Err(e), _) => assert!(!e.to_string().is_empty()),
    }
    match &query {
        Ok(q) => {
            assert_eq!((q.user_id, q.page_id, q.ip), (0, 0, 0));
            assert_eq!(q.ad_type, AdType::Banner);
            reparsed(q);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// `campaigns`: [`Campaigns::from_bytes`] on one campaign file (either
/// format). A loaded map finds every ad's campaign, and writing it in
/// either format and loading that gives the same map back.
pub fn campaigns(data: &[u8]) {
    let c = match Campaigns::from_bytes(data, "fuzz.txt") {
        Ok(c) => c,
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz.txt"), "{e}");
            return;
        }
    };
    assert!(!c.is_empty() && c.len() <= c.num_ads());
    for (ad, index) in c.pairs() {
        assert!((index as usize) < c.len());
        assert_eq!(c.campaign_of(ad), Some(index));
    }
    let (mut mapping, mut csv) = (Vec::new(), b"ad_id,campaign_id\n".to_vec());
    let (mut a, mut k) = ([0u8; UUID_LEN], [0u8; UUID_LEN]);
    for (ad, index) in c.pairs() {
        format_uuid(ad, &mut a);
        format_uuid(c.campaign_id(index), &mut k);
        mapping.extend_from_slice(format!("\"{}\":\"{}\"\n", ascii(&a), ascii(&k)).as_bytes());
        csv.extend_from_slice(format!("{},{}\n", ascii(&a), ascii(&k)).as_bytes());
    }
    for text in [mapping, csv] {
        match Campaigns::from_bytes(&text, "again.txt") {
            Ok(again) => assert_eq!(again, c),
            Err(e) => panic!("{c:?} written and loaded again: {e}"),
        }
    }
}

fn ascii(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

/// `batch`: [`ExchangeData::read_batch_validated`] (rkyv's checked access,
/// `--validate`) on one batch, 16-byte aligned as in a ring frame. Byte 0
/// picks the record type (modulo 5) among those the graph queries send
/// over exchange edges: `u64` (stateless jobs), `Partial<u64, u64>` (the
/// windowed count partials of YSB), [`Bid`] (NEXMark q5, q7), word count's
/// [`Word`] and `Partial<Word, u64>` (a `Word`'s inline form is three
/// integers to rkyv: a corrupted length or non-UTF-8 bytes must read as
/// U+FFFD, never panic or be undefined); the rest is the archive. An
/// accepted batch has every record readable, and the records archived
/// again read back equal.
pub fn batch(data: &[u8]) {
    let Some((&which, archive)) = data.split_first() else {
        return;
    };
    let mut buf = Vec::new();
    let bytes = aligned(archive, &mut buf);
    match which % 5 {
        0 => records::<u64>(bytes),
        1 => records::<Partial<u64, u64>>(bytes),
        2 => records::<Bid>(bytes),
        3 => records::<Word>(bytes),
        _ => records::<Partial<Word, u64>>(bytes),
    }
}

/// `data` copied to a 16-byte aligned position of `buf`.
fn aligned<'b>(data: &[u8], buf: &'b mut Vec<u8>) -> &'b [u8] {
    buf.resize(data.len() + FRAME_ALIGN, 0);
    let start = (FRAME_ALIGN - buf.as_ptr() as usize % FRAME_ALIGN) % FRAME_ALIGN;
    buf[start..start + data.len()].copy_from_slice(data);
    &buf[start..start + data.len()]
}

/// Reads every record of a validated batch (deserialized by rkyv),
/// archives them again and checks they read back equal (compared by their
/// `Debug` form: not every exchanged record type has `PartialEq`).
fn records<T>(bytes: &[u8])
where
    T: ExchangeData + Debug,
    T::Item: rkyv::Deserialize<T, rkyv::rancor::Strategy<rkyv::de::Pool, rkyv::rancor::Error>>,
{
    let native = |items: &[T::Item]| -> Vec<T> {
        items
            .iter()
            .map(|x| {
                rkyv::deserialize::<T, rkyv::rancor::Error>(x)
                    .expect("a validated record deserializes")
            })
            .collect()
    };
    let Ok(items) = T::read_batch_validated(bytes) else {
        return;
    };
    let first = native(items);
    let again = T::to_bytes(&first);
    let items = T::read_batch_validated(&again).expect("a batch archived by to_bytes validates");
    let second = native(items);
    assert_eq!(format!("{first:?}"), format!("{second:?}"));
}
