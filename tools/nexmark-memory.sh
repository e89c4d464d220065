#!/usr/bin/env bash
# Memory of every NEXMark query over a long paced run (issue 16: "no query's
# memory grows without bound in a 10-minute paced run, RSS within +-10% after
# warm-up"). Each query runs with --rate (wall-clock event times, so windows,
# sessions, auction expiry and state TTLs all close in real time) and a
# timeline row every TIMELINE_S seconds; after WARMUP_S the resident set of
# every row must stay within BOUND of the rows' median. Queries run JOBS at a
# time (a paced run at a low rate uses little CPU). Not part of CI.
#
# Usage: tools/nexmark-memory.sh [OUT_DIR]
#   QUERIES="q0 q1 ..."  queries (default: every one `air run nexmark` has)
#   SOAK_S=600           length of each run, s
#   RATE=100000          events/s of each run
#   WORKERS=1            workers of each run
#   JOBS=4               runs at once
#   WARMUP_S=120         timeline rows before this are not judged (a minute of
#                        state TTL, 10 s windows, a day-long q15-q17 window)
#   TIMELINE_S=10        seconds per timeline row
#   AIR=path             the air binary to run (default: build target/release/air)
#   BOUND=0.10           allowed deviation from the median RSS
#   JUDGE_ONLY=1         judge OUT_DIR's timelines of an earlier run again
#                        (same SOAK_S, RATE, WARMUP_S), running nothing
#   ARGS_qN="..."        extra options of query qN. Defaults: q10 writes its
#                        partitions under OUT_DIR/q10-out (it requires
#                        --out-dir); q15, q16, q17 use minute windows
#                        (--window-ms 60000) instead of their day-long default,
#                        so windows close within the run.
# Figures: OUT_DIR/summary.md (a table for docs/performance.md), and per query
# its timeline CSV, report JSON and output.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-out/nexmark-memory-$(date -u +%Y%m%dT%H%M%SZ)}
SOAK_S=${SOAK_S:-600}
RATE=${RATE:-100000}
WORKERS=${WORKERS:-1}
JOBS=${JOBS:-4}
WARMUP_S=${WARMUP_S:-120}
TIMELINE_S=${TIMELINE_S:-10}
BOUND=${BOUND:-0.10}
mkdir -p "$OUT"
if [ -z "${AIR:-}" ]; then
    cargo build --release -j2 -q
    AIR=target/release/air
fi
if [ -z "${QUERIES:-}" ]; then
    # Every query `--query` accepts, from clap's error for a bad value.
    QUERIES=$({ "$AIR" run nexmark --query none 2>&1 || true; } | sed -n 's/.*possible values: //p' | tr -d ',]')
fi
echo "memory: ${SOAK_S} s per query at $RATE events/s, $WORKERS worker(s), $JOBS at a time: $QUERIES" >&2

ARGS_q10=${ARGS_q10:---out-dir $OUT/q10-out}
ARGS_q15=${ARGS_q15:---window-ms 60000}
ARGS_q16=${ARGS_q16:---window-ms 60000}
ARGS_q17=${ARGS_q17:---window-ms 60000}
export ARGS_q10 ARGS_q15 ARGS_q16 ARGS_q17

run_one() {
    local q=$1
    local extra="ARGS_$q"
    # shellcheck disable=SC2086 # word splitting of the extra options is wanted
    "$AIR" run nexmark --query "$q" --rate "$RATE" --duration "$SOAK_S" \
        --workers "$WORKERS" --no-pin ${!extra:-} \
        --timeline "$OUT/$q.timeline.csv" --timeline-s "$TIMELINE_S" \
        --report "$OUT/$q.report.json" >"$OUT/$q.txt" 2>&1 || echo "$q: exit $?" >>"$OUT/$q.txt"
}
export -f run_one
export AIR OUT RATE SOAK_S WORKERS TIMELINE_S
if [ -z "${JUDGE_ONLY:-}" ]; then
    printf '%s\n' $QUERIES | xargs -P "$JOBS" -I{} bash -c 'run_one {}'
fi

python3 - "$OUT" "$WARMUP_S" "$BOUND" "$RATE" "$SOAK_S" "$WORKERS" $QUERIES <<'EOF'
import csv, json, os, statistics, subprocess, sys
out, warm, bound, rate, soak, workers = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
queries = sys.argv[7:]
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
lines = [
    f"NEXMark memory (tools/nexmark-memory.sh): {soak} s per query at {int(rate):,} events/s "
    f"(--rate), {workers} worker(s), {cpu}, {os.cpu_count()} CPUs; RSS of the timeline rows after "
    f"{warm:.0f} s against their median (bound {bound*100:.0f}%); extra options: "
    + ", ".join(f"{q} `{os.environ[f'ARGS_{q}']}`" for q in queries if os.environ.get(f"ARGS_{q}"))
    + ".",
    "",
    "| query | events | rows judged | RSS median MiB | min | max | max deviation | first → last judged MiB | verdict |",
    "|---|---|---|---|---|---|---|---|---|",
]
bad = []
for q in queries:
    try:
        rows = list(csv.DictReader(open(f"{out}/{q}.timeline.csv")))
        rep = json.load(open(f"{out}/{q}.report.json"))
    except (OSError, ValueError) as e:
        lines.append(f"| {q} | | | | | | | | failed: {e} |")
        bad.append(q)
        continue
    # Not the last row (partial), nor rows after the paced input ended
    # (elapsed past the soak): they show the final drain of every window
    # and session, not the steady state.
    judged = [r for r in rows[:-1] if warm <= float(r["elapsed_s"]) <= float(soak) + 1]
    rss = [int(r["rss_bytes"]) for r in judged]
    if not rss:
        lines.append(f"| {q} | {rep.get('events', 0):,} | 0 | | | | | | too short |")
        bad.append(q)
        continue
    med = statistics.median(rss)
    dev = max(abs(x - med) / med for x in rss)
    ok = dev <= bound
    if not ok:
        bad.append(q)
    mib = lambda x: f"{x / 2**20:.1f}"
    lines.append(
        f"| {q} | {rep.get('events', 0):,} | {len(rss)} | {mib(med)} | {mib(min(rss))} | {mib(max(rss))} "
        f"| {dev*100:.1f}% | {mib(rss[0])} → {mib(rss[-1])} | {'flat' if ok else 'NOT FLAT'} |"
    )
s = "\n".join(lines) + "\n"
open(f"{out}/summary.md", "w").write(s)
print(s)
sys.exit(1 if bad else 0)
EOF
