#!/usr/bin/env bash
# Round 29 (issue 12): sample quality with the Mosaic readout kernel (DDGJAX_MGPU_READOUT=1)
# against the Mosaic kernels without it, from one checkpoint, and the GPU pytest
# (benchmarks/calls/quality_ab.sh; call 2 ran the same steps written out in this file,
# with the pytest flags fixed after it).
# Usage: bash benchmarks/calls/round29_quality.sh OUT
exec bash "$(dirname "$0")/quality_ab.sh" "${1:?OUT}" DDGJAX_MGPU_READOUT ro r29q
