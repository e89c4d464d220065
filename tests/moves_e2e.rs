//! Key groups moving with their state (runtime/src/dataflow/moves.rs):
//! with `AIR_MOVE_KEY_GROUPS=rotate` every key group moves to the next
//! worker at every checkpoint barrier, so every operator's keyed state
//! (windows, joins, keyed process, sessions, top-N) crosses between
//! workers tens of times in a run. The rows must equal those of static
//! routing, and the report must count the moves.

mod common;

use std::path::Path;
use std::process::Command;

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// Runs `air args… --out OUT --report REP` with `env`; returns the sorted
/// rows and the report.
fn run(
    dir: &Path,
    tag: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Vec<String>, serde_json::Value) {
    let (out, rep) = (
        dir.join(format!("{tag}.csv")),
        dir.join(format!("{tag}.json")),
    );
    let o = Command::new(AIR)
        .args(args)
        .args([
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ])
        .envs(env.iter().copied())
        .output()
        .expect("run air");
    assert!(
        o.status.success(),
        "air {args:?} {env:?}: {}",
        common::text(&o)
    );
    (common::sorted_rows(&out), common::report(&rep))
}

/// Every query whose operators keep keyed state, at 4 workers with a
/// barrier every 20 ms: the same rows with every group moving at every
/// barrier as without, and the moves counted.
#[test]
fn state_moves_with_its_key_groups_and_rows_stay_exact() {
    let dir = common::tmpdir("moves", "rotate");
    let base = ["--workers", "4", "--no-pin", "--checkpoint-ms", "20"];
    let mut jobs: Vec<Vec<&str>> = vec![vec![
        "run",
        "wa",
        "--shuffle",
        "--events",
        "3000000",
        "--keys",
        "5000",
    ]];
    // q4: a join then an average by category; q5: counts then top-N;
    // q8: a window join; q11: sessions; q18: keyed process; q19: top-N
    // per key; q20: a join with a filter.
    for q in ["q4", "q5", "q8", "q11", "q18", "q19", "q20"] {
        // (q20 keeps every bid and auction: its state is large.)
        let events = if q == "q20" { "500000" } else { "2000000" };
        jobs.push(vec!["run", "nexmark", "--query", q, "--events", events]);
    }
    for job in jobs {
        let mut args = job.clone();
        args.extend(base);
        let tag = job[1..].join("-").replace("--", "");
        let (rows, _) = run(&dir, &format!("{tag}-static"), &args, &[]);
        let (moved, r) = run(
            &dir,
            &format!("{tag}-moved"),
            &args,
            &[("AIR_MOVE_KEY_GROUPS", "rotate")],
        );
        let m = &r["load"]["rebalance"]["moves"];
        assert!(rows.len() > 1, "{job:?}: no rows");
        assert_eq!(
            moved, rows,
            "{job:?}: rows differ when key groups move ({m})"
        );
        let n = m["moves"].as_u64().unwrap();
        assert!(n >= 4, "{job:?}: {m}");
        assert!(m["key_groups"].as_u64().unwrap() > 0, "{job:?}: {m}");
        assert!(m["bytes"].as_u64().unwrap() > 0, "{job:?}: {m}");
        eprintln!("{job:?}: {} rows, {m}", rows.len());
    }
}
