#!/usr/bin/env bash
# Session 27 A/B: the same jobs, rounds and output as session 26's script
# (docs/bench/2026-12-07/ab-session26.sh). OLD = main before the session
# (the hot-keys build of session 26), NEW = key groups movable (an
# Assignment lookup per keyed record), consecutive barrier ids, load per
# period. Usage: ab-session27.sh OLD_AIR NEW_AIR ROUNDS
exec "$(dirname "$0")/../2026-12-07/ab-session26.sh" "$@"
