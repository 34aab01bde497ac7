"""The benchmark helpers that read profiles and run A/B rows (benchmarks/kernel_map.py,
benchmarks/ab_train_step.py, benchmarks/pad_alignment.py): parsing on tiny hand-written
inputs."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import ab_train_step  # noqa: E402
import kernel_map  # noqa: E402
import pad_alignment  # noqa: E402

HLO = """HloModule m
%fused_a (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
%body.1 (arg: (s32[], f32[4])) -> (s32[], f32[4]) {
  %arg = (s32[], f32[4]{0}) parameter(0)
  %gte = f32[4]{0} get-tuple-element(%arg), index=1
  %loop_negate_fusion.3 = f32[4]{0} fusion(%gte), kind=kLoop, calls=%fused_a, metadata={op_name="jit(per_device)/while/body/eval_jaxpr/jvp(PPGN)/block_3/neg" deduplicated_name="loop_negate_fusion.1"}
  %loop_negate_fusion.1 = f32[4]{0} fusion(%loop_negate_fusion.3), kind=kLoop, calls=%fused_a, metadata={op_name="jit(per_device)/while/body/eval_jaxpr/transpose(jvp(PPGN))/block_0/neg"}
  %i = s32[] get-tuple-element(%arg), index=0
  ROOT %t = (s32[], f32[4]{0}) tuple(%i, %loop_negate_fusion.1)
}
ENTRY %main (a: f32[4]) -> f32[4] {
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body.1
}
"""
PROFILE = {"kernels": [{"name": "Stream::loop_negate_fusion_1", "ms_per_call": 0.04,
                        "count_per_call": 20.0}]}


def test_kernel_map_names_each_kernel_by_the_ops_that_share_it():
    inst = kernel_map.read_instructions(HLO, body_only=True)
    assert [i[0] for i in inst] == ["loop_negate_fusion.3", "loop_negate_fusion.1"]
    assert inst[0][3] == "jvp(PPGN)/block_3/neg"              # prefix of the chunk stripped
    rows = kernel_map.kernel_rows(inst, PROFILE, steps=10)
    assert rows[0]["us_per_step"] == pytest.approx(4.0)       # 0.04 ms per call / 10 steps
    assert rows[0]["launches_per_step"] == pytest.approx(2.0)
    assert sorted(rows[0]["ops"]) == ["jvp(PPGN)/block_*/neg x1",
                                      "transpose(jvp(PPGN))/block_*/neg x1"]
    block = kernel_map.block_rows(inst, PROFILE, "block_3/")
    assert [r["instruction"] for r in block] == ["loop_negate_fusion.3"]
    assert block[0]["us_per_launch"] == pytest.approx(2.0)   # 40 us over 20 launches


def test_ab_settings_parse_and_reject_a_pair_without_a_value():
    assert ab_train_step.parse_setting("") == {}
    assert ab_train_step.parse_setting("A=1; XLA_FLAGS=--x=+W,+C") == {
        "A": "1", "XLA_FLAGS": "--x=+W,+C"}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        ab_train_step.parse_setting("A=1;oops")


def test_pad_alignment_rows_parse_and_reject_bad_ones():
    assert pad_alignment.parse_row("train:187:192:32") == {
        "what": "train", "n": 187, "N": 192, "size": 32, "hidden": 128, "blocks": 8}
    assert pad_alignment.parse_row("sample:17:20:64:32:6") == {
        "what": "sample", "n": 17, "N": 20, "size": 64, "hidden": 32, "blocks": 6}
    for bad in ("train:60:64", "infer:60:64:64", "train:64:60:8", "train:a:64:8",
                "train:60:64:0", "train:60:64:8:32"):
        with pytest.raises(ValueError, match="--row"):
            pad_alignment.parse_row(bad)
