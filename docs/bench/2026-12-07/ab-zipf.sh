#!/usr/bin/env bash
# Zipf keys vs uniform keys in `air run wa`, old binary vs new, interleaved
# round by round on one machine (issue 32, first step: O(1) Zipf sampling).
# Usage: ab-zipf.sh OLD_AIR NEW_AIR [ROUNDS] [EVENTS] [CALLGRIND_EVENTS]
# Prints one line per run (round, binary, case, M events/s, CPU s user+sys),
# then medians and the ratio zipf ÷ uniform of events/s per binary, then
# callgrind instruction counts (1 worker, unpinned).
set -euo pipefail
OLD=${1:?old air binary}
NEW=${2:?new air binary}
ROUNDS=${3:-5}
EVENTS=${4:-50000000}
CG_EVENTS=${5:-3000000}
LOG=$(mktemp /tmp/air-ab-zipf.XXXXXX)
trap 'rm -f "$LOG" "$LOG".cg' EXIT
rate() { grep -o '= [0-9.]* M events/s' | head -1 | tr -dc '0-9.'; }
run() { # round, name, binary, case, args...
    local round=$1 name=$2 bin=$3 case=$4; shift 4
    local out
    out=$( { /usr/bin/time -f 'cpu %U %S' "$bin" run wa "$@"; } 2>&1 )
    local r cpu
    r=$(echo "$out" | rate)
    cpu=$(echo "$out" | awk '/^cpu /{print $2+$3}')
    echo "$round $name $case $r $cpu" | tee -a "$LOG"
}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "# events $EVENTS, keys 100000, 2 workers; columns: round binary case Mev/s cpu_s"
base=(--events "$EVENTS" --keys 100000 --workers 2)
for i in $(seq "$ROUNDS"); do
    if (( i % 2 )); then order=(old new); else order=(new old); fi
    for name in "${order[@]}"; do
        if [[ $name == old ]]; then bin=$OLD; else bin=$NEW; fi
        if (( i % 2 )); then cases=(uniform zipf uniform-shuffle zipf-shuffle)
        else cases=(zipf-shuffle uniform-shuffle zipf uniform); fi
        for c in "${cases[@]}"; do
            case $c in
                uniform) run "$i" "$name" "$bin" "$c" "${base[@]}" ;;
                zipf) run "$i" "$name" "$bin" "$c" "${base[@]}" --zipf 1.2 ;;
                uniform-shuffle) run "$i" "$name" "$bin" "$c" "${base[@]}" --shuffle ;;
                zipf-shuffle) run "$i" "$name" "$bin" "$c" "${base[@]}" --zipf 1.2 --shuffle ;;
            esac
        done
    done
done
echo "# medians (M events/s, CPU s) and zipf ÷ uniform (events/s ratio uniform/zipf = CPU cost ratio)"
python3 - "$LOG" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for b in ("old", "new"):
    for c in ("uniform", "zipf", "uniform-shuffle", "zipf-shuffle"):
        r = [float(x[3]) for x in rows if x[1] == b and x[2] == c]
        cpu = [float(x[4]) for x in rows if x[1] == b and x[2] == c]
        med[b, c] = (st.median(r), st.median(cpu))
        print(f"{b:3} {c:16} {med[b, c][0]:7.2f} M events/s  cpu {med[b, c][1]:6.2f} s  (n={len(r)}, min {min(r):.2f}, max {max(r):.2f})")
for b in ("old", "new"):
    for u, z in (("uniform", "zipf"), ("uniform-shuffle", "zipf-shuffle")):
        print(f"{b:3} {z:16} cost ÷ {u}: {med[b, u][0] / med[b, z][0]:.3f}x (events/s), {med[b, z][1] / med[b, u][1]:.3f}x (CPU s)")
for c in ("uniform", "zipf", "uniform-shuffle", "zipf-shuffle"):
    print(f"new ÷ old {c:16} {med['new', c][0] / med['old', c][0]:.3f}x events/s")
PY
echo "# callgrind: --workers 1 --no-pin --events $CG_EVENTS --keys 100000 (instructions, Ir)"
for name in old new; do
    if [[ $name == old ]]; then bin=$OLD; else bin=$NEW; fi
    for c in uniform zipf; do
        extra=(); [[ $c == zipf ]] && extra=(--zipf 1.2)
        ir=$(valgrind --tool=callgrind --callgrind-out-file="$LOG".cg "$bin" run wa \
            --events "$CG_EVENTS" --keys 100000 --workers 1 --no-pin "${extra[@]}" 2>&1 \
            | grep -o 'Collected : [0-9]*' | tr -dc '0-9')
        echo "callgrind $name $c $ir instructions, $(( ir / CG_EVENTS )) per event"
    done
done
