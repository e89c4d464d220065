#!/usr/bin/env bash
# Exactly-once sink rows in pending files (issue 31) against rows held in
# the checkpoint part: two binaries, each with checkpoints every second and
# with `--out` alone, on WA (2.2 M rows a second of output) and NEXMark q8,
# interleaved round by round, the order of binaries and of modes
# alternating per round. Prints one line per run:
#   BINARY QUERY MODE M_EVENTS_PER_S CHECKPOINT_PART_BYTES PARTS
# Usage: ab-pending-rows.sh AIR_OLD AIR_NEW [ROUNDS]
# QUERIES="wa q8" by default; q1 (NEXMark's map: every bid is a row, the
# output dominates what a checkpoint holds) is the sink-bound case.
set -euo pipefail
OLD=${1:?old air binary}
NEW=${2:?new air binary}
ROUNDS=${3:-5}
CK=$(mktemp -d /tmp/air-ab-pending.XXXXXX)
trap 'rm -rf "$CK"' EXIT
rate() { grep -o '= [0-9.]* M events/s' | head -1 | tr -dc '0-9.'; }
run() { # label binary mode query args...
    local label=$1 air=$2 mode=$3; shift 3
    local r bytes parts
    rm -rf "$CK/d" "$CK/out.csv"* "$CK"/.out.csv* "$CK/report.json"
    if [[ $mode == checkpoints ]]; then
        r=$("$air" run "$@" --out "$CK/out.csv" --report "$CK/report.json" \
            --checkpoint-ms 1000 --checkpoint-dir "$CK/d" 2>&1 | rate)
        bytes=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["checkpoints"]["state"]; print(s.get("bytes",0), s.get("parts_written",0))' "$CK/report.json")
    else
        r=$("$air" run "$@" --out "$CK/out.csv" 2>&1 | rate)
        bytes="- -"
    fi
    echo "$label ${q} $mode $r $bytes"
}
for i in $(seq "$ROUNDS"); do
    for q in ${QUERIES:-wa q8}; do
        case $q in
            wa) args=(wa --events 200000000 --keys 100000 --window-ms 1000 --workers 2) ;;
            q8) args=(nexmark --query q8 --events 40000000 --workers 2) ;;
            q1) args=(nexmark --query q1 --events 5000000 --workers 2) ;;
        esac
        if (( i % 2 )); then bins=("old $OLD" "new $NEW"); modes=(out checkpoints)
        else bins=("new $NEW" "old $OLD"); modes=(checkpoints out); fi
        for b in "${bins[@]}"; do
            for m in "${modes[@]}"; do
                run ${b%% *} "${b#* }" "$m" "${args[@]}"
            done
        done
    done
done
