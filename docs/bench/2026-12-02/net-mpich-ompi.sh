#!/bin/bash
# Network tier under MPICH and Open MPI against embedded, interleaved.
# usage: net.sh ROUNDS EVENTS
R=${1:-4}; N=${2:-50000000}
M=/tmp/ab/air-mpich; O=/tmp/ab/air-ompi
OMPI="mpirun.openmpi --oversubscribe --allow-run-as-root -np 2"
run() { # label cmd...
  local label=$1; shift
  local out; out=$( { /usr/bin/time -f "CPU %U %S" "$@" ; } 2>&1 )
  local rate; rate=$(echo "$out" | grep -oE "= [0-9.]+ M events/s" | head -1 | grep -oE "[0-9.]+")
  local cpu; cpu=$(echo "$out" | grep -E "^CPU" | tail -1 | awk '{print $2+$3}')
  echo "$label rate=$rate cpu=$cpu"
}
for r in $(seq $R); do
  for sh in "" "--shuffle"; do
    run "emb$sh" $M run ysb --workers 2 --events $N --no-pin $sh
    run "mpich$sh" mpirun -np 2 $M run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "ompi$sh" $OMPI $O run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "ompi$sh" $OMPI $O run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "mpich$sh" mpirun -np 2 $M run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "emb$sh" $M run ysb --workers 2 --events $N --no-pin $sh
  done
done
