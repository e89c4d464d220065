//! `--validate`: every received batch checked by rkyv, in release builds
//! too; a corrupted batch is an error, never undefined behaviour.

use air_runtime::ExchangeData;

#[test]
fn a_valid_batch_reads_back_and_a_corrupted_one_is_refused() {
    let items: Vec<(u64, u32)> = (0..100).map(|i| (i * 3, i as u32)).collect();
    let bytes = <(u64, u32)>::to_bytes(&items);
    let got = <(u64, u32)>::read_batch_validated(&bytes).unwrap();
    assert_eq!(got.len(), 100);
    assert_eq!(got[7].0.to_native(), 21);
    // The root (at the end) points outside the buffer: refused.
    let mut bad = bytes.to_vec();
    let n = bad.len();
    for b in &mut bad[n - 8..] {
        *b = 0x7f;
    }
    let mut aligned = rkyv::util::AlignedVec::<16>::new();
    aligned.extend_from_slice(&bad);
    let err = <(u64, u32)>::read_batch_validated(&aligned).unwrap_err();
    assert!(err.contains("invalid archived batch"), "{err}");
    // Too short to hold a root at all.
    let mut short = rkyv::util::AlignedVec::<16>::new();
    short.extend_from_slice(&bytes[..4]);
    assert!(<(u64, u32)>::read_batch_validated(&short).is_err());
}
