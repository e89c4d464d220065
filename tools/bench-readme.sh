#!/usr/bin/env bash
# Regenerates the figures of the README's performance section on this
# machine: the machine's description, `air bench ring`, and YSB runs.
# Usage: tools/bench-readme.sh [OUT_DIR]   (default: bench-out/)
# Run it on an otherwise idle machine; it takes about 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
mkdir -p "$out"
cargo build --release -j2 >/dev/null 2>&1
air=./target/release/air

{
    echo "date: $(date -u +%FT%TZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "cpus: $(nproc) (allowed: $(taskset -pc $$ | cut -d: -f2 | tr -d ' '))"
    echo "kernel: $(uname -r)"
    echo "rustc: $(rustc --version)"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

echo "== air bench ring" | tee "$out/ring.txt"
$air bench ring --csv "$out/ring.csv" --plot "$out/ring.png" | tee -a "$out/ring.txt"

ysb() {
    local name=$1; shift
    echo "== air run ysb $*" | tee -a "$out/ysb.txt"
    for i in 1 2 3; do
        $air run ysb "$@" --report "$out/ysb-$name-$i.json" | tee -a "$out/ysb.txt"
    done
}
ysb preagg-w1 --events 300000000 --workers 1
ysb preagg-w2 --events 600000000 --workers 2
ysb shuffle-w1 --events 100000000 --workers 1 --shuffle
ysb shuffle-w2 --events 200000000 --workers 2 --shuffle

# File input: generate once, then parse-bound runs.
if [ ! -f "$out/ysb-events.json" ]; then
    $air gen ysb --events 4000000 --out "$out/ysb-events.json" --campaigns-out "$out/ysb-campaigns.txt" >/dev/null
fi
ysb file-w1 --input "$out/ysb-events.json" --campaigns "$out/ysb-campaigns.txt" --workers 1
ysb file-w2 --input "$out/ysb-events.json" --campaigns "$out/ysb-campaigns.txt" --workers 2
ysb file-qf-w2 --input "$out/ysb-events.json" --campaigns "$out/ysb-campaigns.txt" --workers 2 --parse query-fields

# Latency at a fixed rate across window boundaries (25 s: two window closes).
echo "== air run ysb --rate 50000000 --duration 25" | tee -a "$out/ysb.txt"
$air run ysb --rate 50000000 --duration 25 --report "$out/ysb-latency.json" | tee -a "$out/ysb.txt"
