#!/usr/bin/env bash
# Checkpoints every second on a join (q8) and on keyed process state (q6):
# cost against the same binary writing the same output without them,
# interleaved round by round (the order alternates) on one machine.
# Usage: ab-checkpoints-joins.sh AIR_BINARY [ROUNDS]   (one line per run)
set -euo pipefail
AIR=${1:?air binary}
ROUNDS=${2:-5}
CK=$(mktemp -d /tmp/air-ab-ck.XXXXXX)
trap 'rm -rf "$CK"' EXIT
rate() { grep -o '= [0-9.]* M events/s' | head -1 | tr -dc '0-9.'; }
run() { # name, query args...
    local name=$1; shift
    local r
    r=$("$AIR" run "$@" 2>&1 | rate)
    echo "$name $r"
}
for i in $(seq "$ROUNDS"); do
    for q in q8 q6; do
        case $q in
            q8) args=(nexmark --query q8 --events 40000000 --workers 2) ;;
            q6) args=(nexmark --query q6 --events 10000000 --workers 2) ;;
        esac
        rm -rf "$CK/d"
        if (( i % 2 )); then
            run "$q-out" "${args[@]}" --out "$CK/out.csv"
            run "$q-checkpoints" "${args[@]}" --checkpoint-ms 1000 --checkpoint-dir "$CK/d" --out "$CK/out.csv"
        else
            run "$q-checkpoints" "${args[@]}" --checkpoint-ms 1000 --checkpoint-dir "$CK/d" --out "$CK/out.csv"
            run "$q-out" "${args[@]}" --out "$CK/out.csv"
        fi
    done
done
