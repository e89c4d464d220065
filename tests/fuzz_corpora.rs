//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/`)
//! through the same checks as the cargo-fuzz targets (`fuzz/src/lib.rs`,
//! included here), on stable Rust and without libFuzzer, so that CI keeps
//! every input the fuzzers found interesting (and every past crash) passing.

#[path = "../fuzz/src/lib.rs"]
mod checks;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Runs `check` on every file of `fuzz/corpus/<target>/`; fails naming every
/// file that panicked.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no corpus files", dir.display());
    let failed: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            catch_unwind(AssertUnwindSafe(|| check(&data)))
                .err()
                .map(|_| path.display().to_string())
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} {target} inputs fail: {failed:#?}",
        failed.len(),
        files.len()
    );
}

#[test]
fn frame_header_corpus() {
    replay("frame_header", checks::frame_header);
}

#[test]
fn ysb_json_corpus() {
    replay("ysb_json", checks::ysb_json);
}

#[test]
fn campaigns_corpus() {
    replay("campaigns", checks::campaigns);
}

#[test]
fn batch_corpus() {
    replay("batch", checks::batch);
}
