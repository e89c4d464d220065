#!/usr/bin/env bash
# Checkpoints every second: cost against the same binary without them
# (and with barriers alone), interleaved round by round on one machine.
# Usage: ab-checkpoints.sh AIR_BINARY [ROUNDS]   (prints one line per run)
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
    for q in ysb q5 wa; do
        case $q in
            ysb) args=(ysb --events 1000000000 --workers 2) ;;
            q5) args=(nexmark --query q5 --events 50000000 --workers 2) ;;
            wa) args=(wa --events 200000000 --keys 100000 --window-ms 1000 --workers 2) ;;
        esac
        run "$q-none" "${args[@]}"
        run "$q-barriers" "${args[@]}" --checkpoint-ms 1000
        rm -rf "$CK/d"
        run "$q-checkpoints" "${args[@]}" --checkpoint-ms 1000 --checkpoint-dir "$CK/d" --out "$CK/out.csv"
        run "$q-none-out" "${args[@]}" --out "$CK/out.csv"
    done
done
