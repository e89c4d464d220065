#!/bin/bash
# File-input YSB, old (A) vs new (B), ABBA.
A=/tmp/ab/air-mpich; B=/tmp/ab/air-new
run(){ $1 run ysb --workers 2 --input /tmp/ab/x.json --campaigns /tmp/ab/c.json 2>&1 | grep -oE "= [0-9.]+ M events/s" | grep -oE "[0-9.]+"; }
for r in $(seq ${1:-4}); do echo "A $(run $A)"; echo "B $(run $B)"; echo "B $(run $B)"; echo "A $(run $A)"; done
