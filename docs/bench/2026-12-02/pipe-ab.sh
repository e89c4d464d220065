#!/bin/bash
# YSB from a pipe (cat) and from the file, binary A vs B, ABBA, 2 workers,
# --parse ${PARSE:-query-fields}. Usage: pipe-ab.sh ROUNDS (A, B: binaries;
# events in /tmp/lv/x.json, campaigns /tmp/lv/c.json, from live-input.sh).
set -u
A=${A:-/tmp/lv/air}; B=${B:-/tmp/lv/air-new}; R=${1:-3}; D=/tmp/lv
P="--parse ${PARSE:-query-fields}"
rate(){ grep -oE "= [0-9.]+ M events/s" | grep -oE "[0-9.]+"; }
pipe(){ cat $D/x.json | $1 run ysb $P --workers 2 --input - --campaigns $D/c.json 2>&1 | rate; }
file(){ $1 run ysb $P --workers 2 --input $D/x.json --campaigns $D/c.json 2>&1 | rate; }
for r in $(seq $R); do
  for m in pipe file; do
    echo "$m A $($m $A)"; echo "$m B $($m $B)"; echo "$m B $($m $B)"; echo "$m A $($m $A)"
  done
done
