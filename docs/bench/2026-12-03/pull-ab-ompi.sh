#!/bin/bash
# A/B under Open MPI: main (16aa542) vs pull, interleaved ABBA, with
# embedded (session 17; the loop is net-ab-s18.sh's, labels ompibase /
# ompipull, the embedded runs from the MPICH build).
# usage: pull-ab-ompi.sh ROUNDS EVENTS
MPIRUN="mpirun.openmpi --oversubscribe --allow-run-as-root -np 2" \
  EMB=/tmp/pullx/air-base LA=ompibase LB=ompipull \
  exec "$(dirname "$0")/net-ab-s18.sh" "${1:-3}" "${2:-50000000}" \
  /tmp/pullx/air-base-ompi /tmp/pullx/air-pull-ompi
