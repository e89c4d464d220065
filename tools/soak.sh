#!/usr/bin/env bash
# Soak run (issue 7): YSB for 10 minutes at 80% of its sustainable rate, with
# a live timeline; passes if resident memory stays within +-5% of its median
# and p99 latency stays flat after a warm-up. Not part of CI.
#
# Usage: tools/soak.sh [OUT_DIR]
#   SOAK_S=600        soak length, s
#   RATE=...          events/s to soak at (default: 80% of the rate found)
#   FRACTION=0.8      fraction of the sustainable rate
#   PROBE_S=15        length of each probe of the rate search, s
#   MAX_P99_MS=1000   a probe keeps up if its p99 latency stays under this
#                     (and its input lag under 200 ms)
#   WORKERS=          workers (default: those of `air run ysb`)
#   WARMUP_S=60       timeline rows before this are not judged
#
# "Sustainable": `air bench ysb --sustainable` (doubling, then bisection to
# 5%): the highest rate at which a PROBE_S run keeps its generator within
# 200 ms of its schedule and its p99 latency <= MAX_P99_MS.
# Figures: OUT_DIR/summary.md (for the README), timeline.csv, probes.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-out/soak-$(date -u +%Y%m%dT%H%M%SZ)}
SOAK_S=${SOAK_S:-600}
FRACTION=${FRACTION:-0.8}
PROBE_S=${PROBE_S:-15}
MAX_P99_MS=${MAX_P99_MS:-1000}
WARMUP_S=${WARMUP_S:-60}
mkdir -p "$OUT"
cargo build --release -j2 -q
AIR=target/release/air
WARGS=()
[ -n "${WORKERS:-}" ] && WARGS=(--workers "$WORKERS")

if [ -z "${RATE:-}" ]; then
    "$AIR" bench ysb --sustainable --duration "$PROBE_S" --max-p99-ms "$MAX_P99_MS" \
        "${WARGS[@]}" --csv "$OUT/probes.csv" --report "$OUT/sustainable.json" | tee "$OUT/sustainable.txt"
    SUSTAINABLE=$(python3 -c "import json; print(json.load(open('$OUT/sustainable.json'))['sustainable_rate'])")
    [ "$SUSTAINABLE" -gt 0 ] || { echo "no probed rate keeps up (see $OUT/probes.csv)" >&2; exit 1; }
    RATE=$(python3 -c "print(int($SUSTAINABLE * $FRACTION))")
else
    SUSTAINABLE=unknown
fi
echo "soak: ${SOAK_S} s of YSB at $RATE events/s (sustainable: $SUSTAINABLE)" >&2
"$AIR" run ysb --rate "$RATE" --duration "$SOAK_S" "${WARGS[@]}" \
    --timeline "$OUT/timeline.csv" --timeline-s 10 --report "$OUT/report.json" \
    >"$OUT/run.txt" 2>&1

python3 - "$OUT" "$RATE" "$SUSTAINABLE" "$SOAK_S" "$WARMUP_S" <<'EOF'
import csv, json, statistics, subprocess, sys
out, rate, sus, soak, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
rows = [r for r in csv.DictReader(open(f"{out}/timeline.csv")) if r["latency_p99_ms"]]
judged = [r for r in rows if float(r["elapsed_s"]) >= warm][:-1]  # the last row is a partial interval
rss = [int(r["rss_bytes"]) for r in judged]
p99 = [int(r["latency_p99_ms"]) for r in judged]
eps = [float(r["events_per_s"]) for r in judged]
med = statistics.median(rss)
dev = max(abs(x - med) / med for x in rss)
third = max(1, len(p99) // 3)
first, last = statistics.median(p99[:third]), statistics.median(p99[-third:])
rss_ok = dev <= 0.05
p99_ok = last <= max(1.5 * first, first + 5)
rep = json.load(open(f"{out}/report.json"))
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
s = f"""Soak (tools/soak.sh): {soak} s of YSB at {rate:,} events/s = 80% of the sustainable {sus} events/s,
{rep['workers']} workers, {cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} CPUs.
- timeline rows judged (after {warm:.0f} s warm-up): {len(judged)} x 10 s
- events/s per interval: median {statistics.median(eps):,.0f}, min {min(eps):,.0f}
- RSS: median {med/2**20:.1f} MiB, min {min(rss)/2**20:.1f}, max {max(rss)/2**20:.1f} (max deviation {dev*100:.2f}%; bound 5%): {'flat' if rss_ok else 'NOT FLAT'}
- p99 latency per interval: median of the first third {first} ms, of the last third {last} ms, max {max(p99)} ms: {'flat' if p99_ok else 'NOT FLAT'}
- whole run: p50 {rep['latency_ms']['p50_ms']} ms, p99 {rep['latency_ms']['p99_ms']} ms, max {rep['latency_ms']['max_ms']} ms; peak RSS {rep.get('peak_rss_bytes', 0)/2**20:.1f} MiB
"""
open(f"{out}/summary.md", "w").write(s)
print(s)
sys.exit(0 if rss_ok and p99_ok else 1)
EOF
