#!/bin/bash
# A/B of two air binaries on the forced network tier (2 ranks, 1 worker
# each) against embedded YSB (1 process, 2 workers), pre-aggregated and
# --shuffle, interleaved: per round and mode emb, A, B, B, A, emb.
# usage: net-ab-s18.sh ROUNDS EVENTS A B
#   (A, B: air binaries built with --features mpi)
# env: MPIRUN (default "mpirun.mpich -np 2"), EMB (embedded binary,
#   default A), LA / LB (labels of A / B in the log, default A / B).
# One line per run: LABEL rate=M_events/s cpu=user+sys wall SECONDS load=L;
# net-ab-medians.py summarizes (labels emb, A, B).
R=${1:-3}; N=${2:-100000000}; A=$3; B=$4
MPIRUN=${MPIRUN:-mpirun.mpich -np 2}; EMB=${EMB:-$A}; LA=${LA:-A}; LB=${LB:-B}
run() { # label cmd...
  local label=$1; shift
  local out; out=$( { timeout 300 /usr/bin/time -f "CPU %U %S %e" "$@" ; } 2>&1 )
  local rate; rate=$(echo "$out" | grep -oE "= [0-9.]+ M events/s" | head -1 | grep -oE "[0-9.]+")
  local cpu; cpu=$(echo "$out" | grep -E "^CPU" | tail -1 | awk '{print $2+$3, "wall", $4}')
  echo "$label rate=$rate cpu=$cpu load=$(cut -d' ' -f1 /proc/loadavg)"
}
net() { # label binary mode
  run "$1$3" $MPIRUN $2 run ysb --workers 1 --events $N --no-pin --force-network $3
}
for r in $(seq $R); do
  for sh in "" "--shuffle"; do
    run "emb$sh" $EMB run ysb --workers 2 --events $N --no-pin $sh
    net $LA $A "$sh"; net $LB $B "$sh"; net $LB $B "$sh"; net $LA $A "$sh"
    run "emb$sh" $EMB run ysb --workers 2 --events $N --no-pin $sh
  done
done
