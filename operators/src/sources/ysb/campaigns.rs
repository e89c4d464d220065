//! The ad → campaign map of YSB, its fast lookup table and its files.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::event::{format_uuid, parse_uuid, UUID_LEN};
use super::rng::{uuid_v4, WyRand};

/// The ad → campaign map of YSB.
///
/// In YSB (github: yahoo/streaming-benchmarks, `core.clj`: `gen-ads`,
/// `write-to-redis`), the setup creates 100 campaigns of 10 ads each (all
/// UUIDs) and stores `ad_id → campaign_id` in Redis; the query joins every
/// "view" event's `ad_id` to its campaign. Here the map is in memory:
/// campaigns are numbered `0..len()` (the index the windows key on), and
/// [`Campaigns::campaign_of`] is an open-addressing hash lookup (linear
/// probing, load factor ≤ 0.5, `u128` keys stored inline, a few ns).
///
/// Campaign indices follow first appearance: generated campaigns in order,
/// loaded ones in the order the file first names them.
#[derive(Clone)]
pub struct Campaigns {
    /// Campaign UUID of each campaign index.
    campaign_ids: Vec<u128>,
    /// Every ad, in generation or file order.
    ads: Vec<u128>,
    /// Campaign index of `ads[i]`.
    ad_campaign: Vec<u32>,
    /// Shared copy of `ads` for generator configs.
    ads_arc: Arc<[u128]>,
    table: AdTable,
}

impl PartialEq for Campaigns {
    fn eq(&self, other: &Self) -> bool {
        self.campaign_ids == other.campaign_ids
            && self.ads == other.ads
            && self.ad_campaign == other.ad_campaign
    }
}

impl Eq for Campaigns {}

impl fmt::Debug for Campaigns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Campaigns")
            .field("campaigns", &self.campaign_ids.len())
            .field("ads", &self.ads.len())
            .finish()
    }
}

/// The two campaign-file formats [`Campaigns::load`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CampaignsFormat {
    /// One `"ad_id":"campaign_id"` pair per line (the YSB/AIR mapping file:
    /// the Redis pairs as JSON members). On read, whitespace around the pair,
    /// a trailing comma and lines holding only `{` or `}` are tolerated, so a
    /// whole JSON object with one member per line also loads.
    Mapping,
    /// CSV with the header `ad_id,campaign_id` (either column order), one pair
    /// per row, fields optionally in double quotes.
    Csv,
}

/// Why a campaign file could not be loaded (see [`CampaignsError`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum CampaignsErrorKind {
    /// The file could not be opened or read.
    Io(io::Error),
    /// The file holds no pair at all.
    Empty,
    /// The first line is neither a CSV header nor a mapping pair.
    UnknownFormat,
    /// A line is not of the form of its format.
    BadLine(String),
    /// A field is not a canonical UUID.
    NotAUuid {
        /// `ad_id` or `campaign_id`.
        field: &'static str,
        /// The text found (lossily decoded).
        value: String,
    },
    /// The ad appeared already, on the given line (1-based).
    DuplicateAd {
        /// The duplicated ad.
        ad: u128,
        /// Line of its first appearance.
        first_line: usize,
    },
    /// More campaigns than fit a `u32` index.
    TooManyCampaigns,
}

/// An error loading a campaign file: the file, the 1-based line where known,
/// and what was wrong. Displays as `path:line: what`, e.g.
/// `campaigns.txt:3: field ad_id: "xyz" is not a UUID`.
#[derive(Debug)]
pub struct CampaignsError {
    /// The file, as given to [`Campaigns::load`].
    pub path: PathBuf,
    /// 1-based line number, if the error is about one line.
    pub line: Option<usize>,
    /// What went wrong.
    pub kind: CampaignsErrorKind,
}

impl fmt::Display for CampaignsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            CampaignsErrorKind::Io(e) => write!(f, "cannot read campaign file: {e}"),
            CampaignsErrorKind::Empty => f.write_str("no campaigns (the file holds no ad/campaign pair)"),
            CampaignsErrorKind::UnknownFormat => f.write_str(
                "unknown format: expected a CSV header `ad_id,campaign_id` or `\"ad_id\":\"campaign_id\"` lines",
            ),
            CampaignsErrorKind::BadLine(msg) => f.write_str(msg),
            CampaignsErrorKind::NotAUuid { field, value } => {
                write!(f, "field {field}: {value:?} is not a UUID")
            }
            CampaignsErrorKind::DuplicateAd { ad, first_line } => write!(
                f,
                "field ad_id: duplicate ad {} (first on line {first_line})",
                super::uuid_to_string(*ad)
            ),
            CampaignsErrorKind::TooManyCampaigns => f.write_str("more than 2^32 - 1 campaigns"),
        }
    }
}

impl std::error::Error for CampaignsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CampaignsErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Seed domain of campaign generation, so that `Campaigns::generate(.., s)`
/// and a generator seeded with the same `s` draw unrelated numbers.
const CAMPAIGN_SEED_DOMAIN: u64 = 0x4341_4d50_4149_474e; // "CAMPAIGN"

impl Campaigns {
    /// YSB's number of campaigns (`core.clj`: 100).
    pub const DEFAULT_CAMPAIGNS: usize = 100;
    /// YSB's ads per campaign (`core.clj`: 10).
    pub const DEFAULT_ADS_PER_CAMPAIGN: usize = 10;

    /// YSB's campaigns: [`Campaigns::DEFAULT_CAMPAIGNS`] (100) campaigns of
    /// [`Campaigns::DEFAULT_ADS_PER_CAMPAIGN`] (10) ads, from `seed`.
    pub fn ysb(seed: u64) -> Campaigns {
        Campaigns::generate(
            Self::DEFAULT_CAMPAIGNS,
            Self::DEFAULT_ADS_PER_CAMPAIGN,
            seed,
        )
    }

    /// Generates `num_campaigns` campaigns of `ads_per_campaign` ads each, all
    /// random version-4 UUIDs, deterministically from `seed`. Ad `k` belongs
    /// to campaign `k / ads_per_campaign`.
    ///
    /// # Panics
    /// If either count is 0, or there are more than `u32::MAX` campaigns.
    pub fn generate(num_campaigns: usize, ads_per_campaign: usize, seed: u64) -> Campaigns {
        assert!(num_campaigns > 0 && ads_per_campaign > 0, "no campaigns");
        assert!(u32::try_from(num_campaigns).is_ok(), "too many campaigns");
        let mut rng = WyRand::new(seed ^ CAMPAIGN_SEED_DOMAIN);
        let mut table = AdTable::with_capacity(num_campaigns * ads_per_campaign);
        let campaign_ids: Vec<u128> = (0..num_campaigns)
            .map(|_| uuid_v4(rng.next_u128()))
            .collect();
        let mut ads = Vec::with_capacity(num_campaigns * ads_per_campaign);
        let mut ad_campaign = Vec::with_capacity(num_campaigns * ads_per_campaign);
        for c in 0..num_campaigns as u32 {
            for _ in 0..ads_per_campaign {
                // 122 random bits collide with negligible probability; draw
                // again if they do, so ads are always distinct.
                let ad = loop {
                    let ad = uuid_v4(rng.next_u128());
                    if table.insert(ad, c) {
                        break ad;
                    }
                };
                ads.push(ad);
                ad_campaign.push(c);
            }
        }
        let ads_arc = Arc::from(ads.as_slice());
        Campaigns {
            campaign_ids,
            ads,
            ad_campaign,
            ads_arc,
            table,
        }
    }

    /// Builds the map from `(ad_id, campaign_id)` pairs; campaigns are indexed
    /// in order of first appearance. Errors on a duplicate ad (returning it)
    /// or an empty input.
    pub fn from_pairs(
        pairs: impl IntoIterator<Item = (u128, u128)>,
    ) -> Result<Campaigns, FromPairsError> {
        let mut b = Builder::default();
        for (ad, campaign) in pairs {
            b.push(ad, campaign)
                .map_err(|_| FromPairsError::DuplicateAd(ad))?;
        }
        b.finish().ok_or(FromPairsError::Empty)
    }

    /// Loads a campaign file in either [`CampaignsFormat`], detected from its
    /// first non-empty line: a CSV header `ad_id,campaign_id` means CSV,
    /// anything starting with `"` or `{` means the mapping format. Errors name
    /// the file, the 1-based line and the field. A leading UTF-8 BOM and CRLF
    /// line ends are accepted.
    pub fn load(path: impl AsRef<Path>) -> Result<Campaigns, CampaignsError> {
        let path = path.as_ref();
        let text = fs::read(path).map_err(|e| CampaignsError {
            path: path.to_path_buf(),
            line: None,
            kind: CampaignsErrorKind::Io(e),
        })?;
        Self::from_bytes(&text, path)
    }

    /// [`Campaigns::load`] on the bytes of a campaign file already in
    /// memory; `path` only names the file in errors.
    pub fn from_bytes(text: &[u8], path: impl AsRef<Path>) -> Result<Campaigns, CampaignsError> {
        Self::parse(text).map_err(|(line, kind)| CampaignsError {
            path: path.as_ref().to_path_buf(),
            line,
            kind,
        })
    }

    /// [`Campaigns::load`] on bytes already in memory; errors carry the line.
    fn parse(text: &[u8]) -> Result<Campaigns, (Option<usize>, CampaignsErrorKind)> {
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        let mut lines = text
            .split(|&c| c == b'\n')
            .enumerate()
            .map(|(i, l)| (i + 1, trim(l)))
            .filter(|(_, l)| !l.is_empty());
        let mut b = Builder::default();
        let Some((first_no, first)) = lines.next() else {
            return Err((None, CampaignsErrorKind::Empty));
        };
        let header: Vec<&[u8]> = first
            .split(|&c| c == b',')
            .map(|f| unquote(trim(f)))
            .collect();
        let column = |name: &[u8]| header.iter().position(|h| h.eq_ignore_ascii_case(name));
        let (ad_col, campaign_col) = (column(b"ad_id"), column(b"campaign_id"));
        let is_csv_header = header.len() == 2 && ad_col.is_some() && campaign_col.is_some();
        let format = if is_csv_header {
            CampaignsFormat::Csv
        } else if first.first() == Some(&b'"') || first.first() == Some(&b'{') {
            CampaignsFormat::Mapping
        } else if first.contains(&b',') {
            CampaignsFormat::Csv
        } else {
            return Err((Some(first_no), CampaignsErrorKind::UnknownFormat));
        };
        let mut add =
            |line_no: usize, ad: u128, campaign: u128| b_push(&mut b, line_no, ad, campaign);
        match format {
            CampaignsFormat::Mapping => {
                for (no, line) in std::iter::once((first_no, first)).chain(lines) {
                    if let Some((ad, campaign)) =
                        parse_mapping_line(line).map_err(|k| (Some(no), k))?
                    {
                        add(no, ad, campaign)?;
                    }
                }
            }
            CampaignsFormat::Csv => {
                let (Some(ad_col), Some(campaign_col), 2) = (ad_col, campaign_col, header.len())
                else {
                    return Err((
                        Some(first_no),
                        CampaignsErrorKind::BadLine(format!(
                            "CSV header {:?} is not `ad_id,campaign_id`",
                            String::from_utf8_lossy(first)
                        )),
                    ));
                };
                for (no, line) in lines {
                    let fields: Vec<&[u8]> = line
                        .split(|&c| c == b',')
                        .map(|f| unquote(trim(f)))
                        .collect();
                    if fields.len() != 2 {
                        return Err((
                            Some(no),
                            CampaignsErrorKind::BadLine(format!(
                                "expected 2 CSV fields (ad_id,campaign_id), found {}",
                                fields.len()
                            )),
                        ));
                    }
                    let ad = uuid_field(fields[ad_col], "ad_id").map_err(|k| (Some(no), k))?;
                    let campaign = uuid_field(fields[campaign_col], "campaign_id")
                        .map_err(|k| (Some(no), k))?;
                    add(no, ad, campaign)?;
                }
            }
        }
        b.finish().ok_or((None, CampaignsErrorKind::Empty))
    }

    /// Writes the map in the [`CampaignsFormat::Mapping`] format: one
    /// `"ad_id":"campaign_id"` line per ad, in [`Campaigns::ads`] order.
    pub fn write_mapping(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.write_with(path.as_ref(), None, |out, ad, c| {
            out.push(b'"');
            out.extend_from_slice(ad);
            out.extend_from_slice(b"\":\"");
            out.extend_from_slice(c);
            out.extend_from_slice(b"\"\n");
        })
    }

    /// Writes the map as CSV with the header `ad_id,campaign_id`, one row per
    /// ad, in [`Campaigns::ads`] order.
    pub fn write_csv(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.write_with(path.as_ref(), Some(b"ad_id,campaign_id\n"), |out, ad, c| {
            out.extend_from_slice(ad);
            out.push(b',');
            out.extend_from_slice(c);
            out.push(b'\n');
        })
    }

    /// Writes the map in `format`.
    pub fn write(&self, path: impl AsRef<Path>, format: CampaignsFormat) -> io::Result<()> {
        match format {
            CampaignsFormat::Mapping => self.write_mapping(path),
            CampaignsFormat::Csv => self.write_csv(path),
        }
    }

    fn write_with(
        &self,
        path: &Path,
        header: Option<&[u8]>,
        row: impl Fn(&mut Vec<u8>, &[u8], &[u8]),
    ) -> io::Result<()> {
        let mut out = Vec::with_capacity(self.ads.len() * 80 + 32);
        out.extend_from_slice(header.unwrap_or_default());
        let (mut a, mut c) = ([0u8; UUID_LEN], [0u8; UUID_LEN]);
        for (&ad, &ci) in self.ads.iter().zip(&self.ad_campaign) {
            format_uuid(ad, &mut a);
            format_uuid(self.campaign_ids[ci as usize], &mut c);
            row(&mut out, &a, &c);
        }
        fs::File::create(path)?.write_all(&out)
    }

    /// The campaign index (`0..len()`) of `ad_id`, or `None` if the ad is
    /// unknown. This is the YSB join, run on every "view" event: one
    /// multiply-shift hash and, nearly always, one probe.
    #[inline]
    pub fn campaign_of(&self, ad_id: u128) -> Option<u32> {
        self.table.get(ad_id)
    }

    /// The UUID of campaign `index`.
    ///
    /// # Panics
    /// If `index >= self.len()`.
    #[inline]
    pub fn campaign_id(&self, index: u32) -> u128 {
        self.campaign_ids[index as usize]
    }

    /// The UUIDs of all campaigns, by index.
    pub fn campaign_ids(&self) -> &[u128] {
        &self.campaign_ids
    }

    /// Every ad, in generation or file order.
    pub fn ads(&self) -> &[u128] {
        &self.ads
    }

    /// A shared copy of [`Campaigns::ads`] (for generator configs).
    pub fn ads_shared(&self) -> Arc<[u128]> {
        Arc::clone(&self.ads_arc)
    }

    /// `(ad_id, campaign index)` of every ad, in [`Campaigns::ads`] order.
    pub fn pairs(&self) -> impl Iterator<Item = (u128, u32)> + '_ {
        self.ads
            .iter()
            .copied()
            .zip(self.ad_campaign.iter().copied())
    }

    /// Number of campaigns.
    pub fn len(&self) -> usize {
        self.campaign_ids.len()
    }

    /// Always false: a `Campaigns` has at least one campaign.
    pub fn is_empty(&self) -> bool {
        self.campaign_ids.is_empty()
    }

    /// Number of ads.
    pub fn num_ads(&self) -> usize {
        self.ads.len()
    }
}

/// Why [`Campaigns::from_pairs`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FromPairsError {
    /// This ad appeared twice.
    #[error("duplicate ad {}", super::uuid_to_string(*.0))]
    DuplicateAd(u128),
    /// No pairs were given.
    #[error("no campaigns")]
    Empty,
}

fn b_push(
    b: &mut Builder,
    line_no: usize,
    ad: u128,
    campaign: u128,
) -> Result<(), (Option<usize>, CampaignsErrorKind)> {
    match b.push(ad, campaign) {
        Ok(()) => {
            b.lines.push(line_no);
            Ok(())
        }
        Err(PushError::Duplicate(first)) => Err((
            Some(line_no),
            CampaignsErrorKind::DuplicateAd {
                ad,
                first_line: b.lines[first],
            },
        )),
        Err(PushError::TooMany) => Err((Some(line_no), CampaignsErrorKind::TooManyCampaigns)),
    }
}

/// Accumulates pairs while loading.
#[derive(Default)]
struct Builder {
    campaign_ids: Vec<u128>,
    campaign_index: std::collections::HashMap<u128, u32>,
    ads: Vec<u128>,
    ad_campaign: Vec<u32>,
    /// Position of each ad in `ads`.
    ad_pos: std::collections::HashMap<u128, usize>,
    /// Source line of each ad (file loads only).
    lines: Vec<usize>,
}

enum PushError {
    /// Index (in `ads`) of the earlier occurrence.
    Duplicate(usize),
    TooMany,
}

impl Builder {
    fn push(&mut self, ad: u128, campaign: u128) -> Result<(), PushError> {
        if let Some(&first) = self.ad_pos.get(&ad) {
            return Err(PushError::Duplicate(first));
        }
        let next = u32::try_from(self.campaign_ids.len()).map_err(|_| PushError::TooMany)?;
        let c = *self.campaign_index.entry(campaign).or_insert_with(|| {
            self.campaign_ids.push(campaign);
            next
        });
        self.ad_pos.insert(ad, self.ads.len());
        self.ads.push(ad);
        self.ad_campaign.push(c);
        Ok(())
    }

    fn finish(self) -> Option<Campaigns> {
        if self.ads.is_empty() {
            return None;
        }
        let mut table = AdTable::with_capacity(self.ads.len());
        for (&ad, &c) in self.ads.iter().zip(&self.ad_campaign) {
            let fresh = table.insert(ad, c);
            debug_assert!(fresh);
        }
        Some(Campaigns {
            campaign_ids: self.campaign_ids,
            ads_arc: Arc::from(self.ads.as_slice()),
            ads: self.ads,
            ad_campaign: self.ad_campaign,
            table,
        })
    }
}

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

fn unquote(s: &[u8]) -> &[u8] {
    s.strip_prefix(b"\"")
        .and_then(|s| s.strip_suffix(b"\""))
        .unwrap_or(s)
}

fn uuid_field(s: &[u8], field: &'static str) -> Result<u128, CampaignsErrorKind> {
    parse_uuid(s).ok_or_else(|| CampaignsErrorKind::NotAUuid {
        field,
        value: lossy_prefix(s, 64),
    })
}

/// The text of a bad value or line for an error message, cut at `max` bytes.
fn lossy_prefix(s: &[u8], max: usize) -> String {
    if s.len() <= max {
        String::from_utf8_lossy(s).into_owned()
    } else {
        format!("{}…", String::from_utf8_lossy(&s[..max]))
    }
}

/// One mapping line (already trimmed): `Ok(None)` for structural lines
/// (`{`, `}`), the pair otherwise.
fn parse_mapping_line(line: &[u8]) -> Result<Option<(u128, u128)>, CampaignsErrorKind> {
    let mut l = line;
    l = l.strip_prefix(b"{").unwrap_or(l).trim_ascii_start();
    l = l.strip_suffix(b",").unwrap_or(l).trim_ascii_end();
    l = l.strip_suffix(b"}").unwrap_or(l).trim_ascii_end();
    l = l.strip_suffix(b",").unwrap_or(l).trim_ascii_end();
    if l.is_empty() {
        return Ok(None);
    }
    let bad = || {
        CampaignsErrorKind::BadLine(format!(
            "expected \"ad_id\":\"campaign_id\", found {:?}",
            lossy_prefix(line, 160)
        ))
    };
    let rest = l.strip_prefix(b"\"").ok_or_else(bad)?;
    let q = memchr::memchr(b'"', rest).ok_or_else(bad)?;
    let (ad_text, rest) = (&rest[..q], rest[q + 1..].trim_ascii_start());
    let rest = rest.strip_prefix(b":").ok_or_else(bad)?.trim_ascii_start();
    let campaign_text = rest
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .ok_or_else(bad)?;
    let ad = uuid_field(ad_text, "ad_id")?;
    let campaign = uuid_field(campaign_text, "campaign_id")?;
    Ok(Some((ad, campaign)))
}

/// Open-addressing hash table `u128 → u32` with linear probing.
///
/// Keys are stored inline (16 bytes each) in a power-of-two array, half
/// empty at most; the all-zero key marks an empty slot, so the nil UUID, if
/// it is an ad, is kept aside in `zero`.
#[derive(Clone, Debug)]
struct AdTable {
    keys: Box<[u128]>,
    values: Box<[u32]>,
    /// `64 - log2(keys.len())`: the hash's top bits index the array.
    shift: u32,
    /// Campaign of the nil-UUID ad, if present.
    zero: Option<u32>,
}

impl AdTable {
    fn with_capacity(n: usize) -> AdTable {
        let slots = (n.max(1) * 2).next_power_of_two().max(16);
        AdTable {
            keys: vec![0u128; slots].into_boxed_slice(),
            values: vec![0u32; slots].into_boxed_slice(),
            shift: 64 - slots.trailing_zeros(),
            zero: None,
        }
    }

    /// Fibonacci hashing of the folded key: good spread for random UUIDs
    /// and for structured (sequential) ids alike.
    #[inline(always)]
    fn slot(&self, key: u128) -> usize {
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Inserts `key → value`; false (and no change) if `key` is present.
    fn insert(&mut self, key: u128, value: u32) -> bool {
        if key == 0 {
            return self.zero.replace(value).is_none();
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(key);
        loop {
            if self.keys[i] == key {
                return false;
            }
            if self.keys[i] == 0 {
                self.keys[i] = key;
                self.values[i] = value;
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn get(&self, key: u128) -> Option<u32> {
        if key == 0 {
            return self.zero;
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(key);
        loop {
            let k = self.keys[i];
            if k == key {
                return Some(self.values[i]);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_is_deterministic() {
        let a = Campaigns::generate(100, 10, 5);
        let b = Campaigns::generate(100, 10, 5);
        let c = Campaigns::generate(100, 10, 6);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 100);
        assert_eq!(a.num_ads(), 1000);
        for (k, &ad) in a.ads().iter().enumerate() {
            assert_eq!(a.campaign_of(ad), Some((k / 10) as u32));
        }
        assert_eq!(a.campaign_of(12345), None);
        assert_eq!(a.campaign_of(0), None);
    }

    #[test]
    fn table_handles_sequential_and_nil_keys() {
        let pairs = (0..5000u128).map(|i| (i, i % 7 + 1));
        let c = Campaigns::from_pairs(pairs).unwrap();
        assert_eq!(c.len(), 7);
        for i in 0..5000u128 {
            assert_eq!(c.campaign_of(i), Some((i % 7) as u32), "{i}");
        }
        assert_eq!(c.campaign_of(5000), None);
        assert_eq!(c.campaign_of(u128::MAX), None);
        assert_eq!(
            Campaigns::from_pairs([(1, 1), (2, 1), (1, 2)]),
            Err(FromPairsError::DuplicateAd(1))
        );
        assert_eq!(Campaigns::from_pairs([]), Err(FromPairsError::Empty));
    }

    #[test]
    fn mapping_lines() {
        let a = "01234567-89ab-cdef-fedc-ba9876543210";
        let c = "11234567-89ab-cdef-fedc-ba9876543210";
        for line in [
            format!("\"{a}\":\"{c}\""),
            format!("\"{a}\" : \"{c}\","),
            format!("{{\"{a}\":\"{c}\"}}"),
            format!("{{\"{a}\":\"{c}\","),
        ] {
            let got = parse_mapping_line(line.trim().as_bytes()).unwrap().unwrap();
            assert_eq!(
                got,
                (
                    parse_uuid(a.as_bytes()).unwrap(),
                    parse_uuid(c.as_bytes()).unwrap()
                )
            );
        }
        assert_eq!(parse_mapping_line(b"{").unwrap(), None);
        assert_eq!(parse_mapping_line(b"},").unwrap(), None);
    }
}
