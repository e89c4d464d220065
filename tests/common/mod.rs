//! Helpers shared by the end-to-end tests.

use std::path::Path;

/// A temporary directory (tempfile's), removed when the test ends, also
/// when it fails; derefs to its path.
pub struct TmpDir(tempfile::TempDir);

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

/// A new temporary directory whose name starts with `air-<prefix>-<tag>-`.
pub fn tmpdir(prefix: &str, tag: &str) -> TmpDir {
    TmpDir(
        tempfile::Builder::new()
            .prefix(&format!("air-{prefix}-{tag}-"))
            .tempdir()
            .expect("create a temporary directory"),
    )
}
