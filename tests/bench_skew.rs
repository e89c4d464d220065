//! `air bench skew`: one `air run wa --shuffle` and one `air run ysb
//! --shuffle` per exponent, rebalance setting and round; a CSV row per
//! run, rebalance evening the load of Zipf keys and campaigns, a PNG; bad
//! options refused.

use std::process::Command;

const AIR: &str = env!("CARGO_BIN_EXE_air");

const COLUMNS: &str = "query,round,seq,zipf,rebalance,events,events_per_s,cpu_s,wall_s,\
                       events_per_cpu_s,max_over_mean,kept,kept_pct,partials,groups_max,\
                       group_changes";

#[test]
fn skew_runs_every_exponent_off_and_on_and_rebalance_evens_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, png) = (dir.path().join("k.csv"), dir.path().join("k.png"));
    let o = Command::new(AIR)
        .args([
            "bench",
            "skew",
            "--events",
            "200000",
            "--workers",
            "4",
            "--zipf",
            "1.2,0",
            "--repeats",
            "1",
            "--csv",
        ])
        .arg(&csv)
        .arg("--plot")
        .arg(&png)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("on / off") && table.contains("max/mean"),
        "{table}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), COLUMNS);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // One round: WA then YSB, the exponents ascending, off before on.
    let keys: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[3], r[4])).collect();
    assert_eq!(
        keys,
        [
            ("wa", "0", "off"),
            ("wa", "0", "on"),
            ("wa", "1.2", "off"),
            ("wa", "1.2", "on"),
            ("ysb", "0", "off"),
            ("ysb", "0", "on"),
            ("ysb", "1.2", "off"),
            ("ysb", "1.2", "on")
        ],
        "{text}"
    );
    let col = |r: &[&str], name: &str| -> f64 {
        let i = COLUMNS.split(',').position(|c| c == name).unwrap();
        r[i].parse().unwrap()
    };
    for r in &rows {
        assert_eq!(r.len(), COLUMNS.split(',').count(), "{text}");
        assert_eq!(col(r, "events"), 200_000.0, "{text}");
        assert!(
            col(r, "events_per_s") > 0.0 && col(r, "cpu_s") > 0.0,
            "{text}"
        );
        assert!(col(r, "max_over_mean") >= 1.0, "{text}");
        if r[4] == "off" {
            assert_eq!(col(r, "kept"), 0.0, "off keeps nothing: {text}");
        }
    }
    for (off, on) in [(&rows[2], &rows[3]), (&rows[6], &rows[7])] {
        assert!(
            col(on, "max_over_mean") <= col(off, "max_over_mean"),
            "{} zipf 1.2: max/mean on above off: {text}",
            on[0]
        );
        assert!(
            col(on, "kept") > 0.0,
            "{} zipf 1.2: nothing kept: {text}",
            on[0]
        );
    }
    // YSB's 100 campaigns at Zipf 1.2 load 4 workers unevenly.
    assert!(col(&rows[6], "max_over_mean") > 1.2, "{text}");
    let png = std::fs::read(&png).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
}

#[test]
fn skew_refuses_what_it_sets_itself_and_bad_exponents() {
    for (args, msg) in [
        (&["--zipf", "-1"][..], "--zipf"),
        (&["--zipf", "1.2,,1.5"][..], "an empty exponent"),
        (&["--repeats", "0"][..], "--repeats"),
        (&["--query", "nexmark"][..], "--query"),
        (
            &["--", "--event-time", "wallclock"][..],
            "may not set --event-time",
        ),
        (&["--", "--rebalance", "on"][..], "may not set --rebalance"),
    ] {
        let o = Command::new(AIR)
            .args(["bench", "skew"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}
