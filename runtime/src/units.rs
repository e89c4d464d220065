//! Numbers for people: thousands separators and binary byte units, used by
//! every report and refusal (`air run`'s summary, `air plan`, setup errors).

/// `n` with thousands separators: `50176` → `"50,176"`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `b` bytes in binary units with two decimals: `1536` → `"1.50 KiB"`,
/// below 1 KiB exact: `512` → `"512 B"`.
pub fn binary_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_and_units() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(50_176), "50,176");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(binary_bytes(512), "512 B");
        assert_eq!(binary_bytes(1536), "1.50 KiB");
        assert_eq!(binary_bytes(1 << 30), "1.00 GiB");
    }
}
