//! `--side-input FILE`: a bounded table `key → value` read once per
//! process before the graph is built and shared read-only by every worker
//! (q13's side input).
//!
//! Format: UTF-8 CSV without a header, one record per line, exactly two
//! fields: `key,value`. `key` is an unsigned decimal integer (u64,
//! surrounding spaces allowed); `value` is any text on the line (quote it,
//! `"a,b"`, to hold a comma or a quote, `""` inside quotes; an empty value
//! is allowed; a quoted value cannot span lines). Blank lines are skipped. A key may appear
//! once. Anything else is a bad line: the run stops with exit code 2 and a
//! message naming the file, the line and the field. Without the option the
//! table is the Flink suite's generated one ([`SideInput::flink_default`]).

use crate::queries::common::CliError;
use std::path::Path;

/// The keys a bid can look up: `auction % MODULUS` (the Flink suite's
/// `mod(B.auction, 10000)`).
pub const MODULUS: u64 = 10_000;

/// The side input table, indexed by key. Only keys below [`MODULUS`] can
/// match a bid; larger keys are accepted (checked, not kept).
#[derive(Debug, Default)]
pub struct SideInput {
    /// `values[k]`: the value of key `k` (< [`MODULUS`]).
    values: Vec<Option<Box<str>>>,
}

impl SideInput {
    /// The Flink suite's table (`SideInputGenerator --num 10000`): keys
    /// `0..10000`, each with its own decimal as value.
    pub fn flink_default() -> Self {
        SideInput {
            values: (0..MODULUS)
                .map(|k| Some(k.to_string().into_boxed_str()))
                .collect(),
        }
    }

    /// Reads `path` (the format in the module doc).
    ///
    /// # Errors
    /// [`CliError::BadInput`] (exit 2) naming the file, and for a bad line
    /// its number and field: unreadable file, bad CSV, a line without
    /// exactly two fields, a key that is not a u64, a key given twice.
    pub fn load(path: &Path) -> Result<Self, CliError> {
        let name = path.display();
        let bad = |m: String| CliError::BadInput(format!("--side-input {name}: {m}"));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let mut table = SideInput {
            values: vec![None; MODULUS as usize],
        };
        // Line of each key below the modulus (for a duplicate's message);
        // larger keys are checked for duplicates here.
        let mut lines = vec![0usize; MODULUS as usize];
        let mut large = std::collections::HashMap::new();
        let mut rec = csv::StringRecord::new();
        for (i, text) in text.lines().enumerate() {
            let line = i + 1;
            if text.trim().is_empty() {
                continue;
            }
            // One record per line: every quote opens, closes or is
            // doubled, so a line's quotes pair up.
            if text.bytes().filter(|&b| b == b'"').count() % 2 == 1 {
                return Err(bad(format!(
                    "line {line}: a quote is not closed on its line"
                )));
            }
            let mut rd = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .buffer_capacity(text.len() + 1)
                .from_reader(text.as_bytes());
            match rd.read_record(&mut rec) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return Err(bad(format!("line {line}: {e}"))),
            }
            if rec.len() != 2 {
                return Err(bad(format!(
                    "line {line}: {} fields; need 2, key,value",
                    rec.len()
                )));
            }
            let field = &rec[0];
            let key: u64 = field.trim().parse().map_err(|_| {
                bad(format!(
                    "line {line}, field 1 (key): {field:?} is not an unsigned integer"
                ))
            })?;
            let first = if key < MODULUS {
                let l = &mut lines[key as usize];
                let first = *l;
                if first == 0 {
                    *l = line;
                    table.values[key as usize] = Some(rec[1].into());
                }
                first
            } else {
                *large.entry(key).or_insert(line)
            };
            if first != 0 && first != line {
                return Err(bad(format!(
                    "line {line}, field 1 (key): key {key} was given already on line {first}"
                )));
            }
        }
        Ok(table)
    }

    /// The value a bid on `auction` joins with (`auction % MODULUS`), if
    /// the table has that key.
    #[inline]
    pub fn get(&self, auction: u64) -> Option<&str> {
        self.values
            .get((auction % MODULUS) as usize)
            .and_then(|v| v.as_deref())
    }
}
