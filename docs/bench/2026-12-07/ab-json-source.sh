#!/bin/sh
# JSON-lines source vs the YSB file reader (issue 30), two builds of the
# `json_source` bench interleaved: OLD and NEW are copies of
# target/release/deps/json_source-* built by
#   cargo bench -p air-operators --bench json_source --no-run -j2
# at the two commits. Each run prints records/s per reader and the ratio to
# the YSB reader measured in the same process.
set -eu
OLD=${1:?old bench binary}
NEW=${2:?new bench binary}
for i in 1 2 3; do
  for b in "$OLD" "$NEW"; do
    echo "== $b (pass $i)"
    ONLY=ysb_reader,json_source_typed,json_source_strings ROUNDS=7 "$b" --bench | tail -4
  done
done
