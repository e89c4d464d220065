#!/usr/bin/env bash
# Regenerates the figures of the README's performance section on this
# machine: the machine's description, `air bench ring`, and YSB runs.
# Usage: tools/bench-readme.sh [OUT_DIR]   (default: bench-out/)
# With MPI installed (mpirun on PATH) it builds the `mpi` feature and adds
# the distributed figures: YSB under mpirun against the embedded run,
# `air bench rma` and `air bench exchange` on each tier.
# Run it on an otherwise idle machine; it takes about 6 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
mkdir -p "$out"
features=""
if command -v mpirun >/dev/null; then
    features="mpi"
fi
if pkg-config --exists hwloc 2>/dev/null; then
    features="${features:+$features,}hwloc"
fi
if [ -n "$features" ]; then features="--features $features"; fi
cargo build --release -j2 $features >/dev/null 2>&1
air=./target/release/air

{
    echo "date: $(date -u +%FT%TZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "cpus: $(nproc) (allowed: $(taskset -pc $$ | cut -d: -f2 | tr -d ' '))"
    echo "kernel: $(uname -r)"
    echo "rustc: $(rustc --version)"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    if command -v mpirun >/dev/null; then
        echo "mpi: $(mpirun --version 2>/dev/null | grep -E 'Version|Open MPI|OpenRTE' | sed -n 1p | tr -s ' \t' ' ')"
    fi
} | tee "$out/machine.txt"

echo "== air topo" | tee "$out/topo.txt"
$air topo | tee -a "$out/topo.txt"

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

# Placement: pinned by the plan vs --no-pin, interleaved.
echo "== air run ysb (pinned) vs air run ysb --no-pin, 5 rounds" | tee -a "$out/ysb.txt"
for i in 1 2 3 4 5; do
    $air run ysb --report "$out/ysb-pinned-$i.json" | sed 's/^/pinned: /' | tee -a "$out/ysb.txt"
    $air run ysb --no-pin --report "$out/ysb-nopin-$i.json" | sed 's/^/no-pin: /' | tee -a "$out/ysb.txt"
done

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

# Workloads (issue 6): events/s per worker, 1 and 2 workers, 3 runs each.
workload() {
    local name=$1; shift
    for w in 1 2; do
        for i in 1 2 3; do
            $air run "$@" --workers $w --report "$out/$name-w$w-$i.json" | sed -n 1p \
                | tee -a "$out/workloads.txt"
        done
    done
}
: > "$out/workloads.txt"
workload wa wa --events 200000000
for q in q1 q2 q7; do workload nexmark-$q nexmark --query $q --events 100000000; done
for q in q5 q8; do workload nexmark-$q nexmark --query $q --events 30000000; done
if [ ! -f "$out/words.txt" ]; then
    # ~100 MB of text: a fixed word list in a seeded order.
    python3 -c "
import random
r = random.Random(1)
words = open('/usr/share/dict/words').read().split() if __import__('os').path.exists('/usr/share/dict/words') else ['w%d' % i for i in range(50000)]
with open('$out/words.txt', 'w') as f:
    for _ in range(200000):
        f.write(' '.join(r.choice(words) for _ in range(80)) + '\\n')
"
fi
workload wordcount wordcount --input "$out/words.txt"

if command -v mpirun >/dev/null; then
    # YSB: 2 workers in one process against 2 ranks x 1 worker (node tier,
    # then network tier), interleaved so drift hits them alike.
    echo "== YSB embedded vs mpirun -np 2" | tee "$out/mpi-ysb.txt"
    for i in 1 2 3 4 5; do
        $air run ysb --events 200000000 --workers 2 --report "$out/mpi-ysb-embedded-$i.json" | head -1 | tee -a "$out/mpi-ysb.txt"
        mpirun -np 2 $air run ysb --events 200000000 --workers 1 --report "$out/mpi-ysb-node-$i.json" | head -1 | tee -a "$out/mpi-ysb.txt"
        mpirun -np 2 $air run ysb --events 200000000 --workers 1 --force-network --report "$out/mpi-ysb-network-$i.json" | head -1 | tee -a "$out/mpi-ysb.txt"
    done
    echo "== mpirun -np 2 air bench rma" | tee "$out/rma.txt"
    mpirun -np 2 $air bench rma --csv "$out/rma.csv" --plot "$out/rma.png" | tee -a "$out/rma.txt"
    echo "== air bench exchange (thread, node, network tiers)" | tee "$out/exchange.txt"
    $air bench exchange --workers 2 | tee -a "$out/exchange.txt"
    mpirun -np 2 $air bench exchange --workers 1 | tee -a "$out/exchange.txt"
    mpirun -np 2 $air bench exchange --workers 1 --force-network | tee -a "$out/exchange.txt"
fi
