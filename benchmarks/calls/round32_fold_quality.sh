#!/usr/bin/env bash
# Round 32 (issue 12; prepared in session 21, which had no device time left): sample quality
# with the input embedding folded into the first block (DDGJAX_FOLD_EMBED=1, the default)
# against the unfolded model, from one checkpoint; and the Mosaic kernel tests on the GPU
# (two failed in round 31 on a bug of the tests' helper, fixed since, not rerun on a GPU).
# Usage: bash benchmarks/calls/round32_fold_quality.sh OUT
exec bash "$(dirname "$0")/quality_ab.sh" "${1:?OUT}" DDGJAX_FOLD_EMBED fold r32q
