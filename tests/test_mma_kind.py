"""benchmarks/mma_kind.py: counting tensor-core instructions per PTX kernel."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import mma_kind  # noqa: E402

PTX = """
.version 8.4
.target sm_90a
.visible .entry fusion_1(
    .param .u64 p0
)
{
    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, ...;
    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f5, %f6, %f7, %f8}, ...;
}
.entry pallas_pair_mlp(
)
{
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {...}, %rd1, %rd2, p, 1, 1, 0, 1;
    wgmma.commit_group.sync.aligned;
}
.visible .entry loop_add(
)
{
    add.f32 %f1, %f2, %f3;
}
"""


def test_counts_each_kernels_tensor_core_instructions():
    counts = mma_kind.count_mma(PTX)
    assert counts == {"fusion_1": {"wgmma": 0, "mma_sync": 2},
                      "pallas_pair_mlp": {"wgmma": 1, "mma_sync": 0},
                      "loop_add": {"wgmma": 0, "mma_sync": 0}}
