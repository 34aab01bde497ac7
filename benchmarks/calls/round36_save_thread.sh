#!/usr/bin/env bash
# Round 36 (issue 12): checkpoint writes started by one background thread (this code)
# against the code before (carried as .baseline/, commit 0aa442f): the same runs as
# round 35's driver (Ego-small paper config cold, bf16 + fused twice each, float32, five
# seeds each, the CLI).
# Usage: bash benchmarks/calls/round36_save_thread.sh OUT
exec bash "$(dirname "$0")/round35_saves.sh" "$@"
