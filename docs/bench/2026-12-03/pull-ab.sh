#!/bin/bash
# A/B: main (16aa542) vs pull, MPICH, interleaved ABBA, with embedded
# (session 17; the loop is net-ab-s18.sh's, labels base / pull).
# usage: pull-ab.sh ROUNDS EVENTS
LA=base LB=pull exec "$(dirname "$0")/net-ab-s18.sh" "${1:-3}" "${2:-20000000}" \
  /tmp/pullx/air-base /tmp/pullx/air-pull
