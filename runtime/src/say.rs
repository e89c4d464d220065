//! Whole lines on standard error, one `write` each.
//!
//! Under `mpirun` every rank's standard error goes into one pipe that the
//! launcher copies to the terminal. `eprintln!` writes a formatted line in
//! pieces (one `write(2)` per literal and argument), so two ranks printing
//! at once interleave inside a line ("air: rank air: rank 1 serves …"),
//! and a reader that looks for whole lines misses both. [`line`] formats
//! first and writes the line with a single `write_all`, which a pipe keeps
//! whole for lines up to `PIPE_BUF` (4096 bytes on Linux).

use std::io::Write;

/// Writes `text` and a newline to standard error in one write. Errors
/// (a closed standard error) are ignored, as `eprintln!` would panic on
/// them and a diagnostic is never worth a crash.
pub fn line(text: &str) {
    let mut buf = String::with_capacity(text.len() + 1);
    buf.push_str(text);
    buf.push('\n');
    let _ = std::io::stderr().lock().write_all(buf.as_bytes());
}

/// `eprintln!` whose line reaches standard error in one write, so lines of
/// ranks that share a pipe (under `mpirun`) never interleave; see
/// [`line`](crate::say::line).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(&::std::format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_is_formatted_before_it_is_written() {
        // Nothing to observe on stderr from a unit test; check that the
        // macro expands and formats like eprintln!.
        super::line(&format!("air: say test {}", 1));
        crate::say!("air: say test {} {}", 2, "x");
    }
}
