"""Which model ops each profiled kernel runs: a kernel profile joined with its optimized HLO.

    python benchmarks/kernel_map.py HLO_TXT PROFILE_JSON [--steps 50] [--block block_3/]
        [--top 40] [--out OUT.json]

``HLO_TXT`` is a compiled program's text (``*.hlo.txt`` of ``profile_ppgn.py`` or
``seeds_profile.py``), ``PROFILE_JSON`` the kernel table the same script wrote for it
(``profile_<what>.json``: device time and launches per call, by kernel name). XLA names a
fusion kernel after its HLO instruction (``gemm_fusion_dot.439`` runs as
``gemm_fusion_dot_439``; instructions that share compiled code run under their
``deduplicated_name``), and every instruction carries the JAX op that made it
(``op_name``: e.g. ``transpose(jvp(PPGN))/block_3/mix/...`` is the mixing layer's backward
in block 3). cuBLAS calls run under cuBLAS's own kernel names and stay unmapped.

Prints, per kernel: device microseconds per step (``--steps``: training steps per profiled
call; 1 for a single step or forward), launches per step, the output shape and the op names
of its instructions (``block_K`` folded to ``block_*``). With ``--block``, instead every
instruction of the step whose op name contains that text, in program order, with the
per-launch time of its kernel: one block's forward and backward, kernel by kernel.
"""
from __future__ import annotations

import argparse
import collections
import json
import re

INSTRUCTION = re.compile(r"\s*(?:ROOT )?%(\S+) = (\([^()]*\)|\S+) ([\w\-]+)\(")
SKIP_OPS = {"get-tuple-element", "bitcast", "parameter", "tuple", "constant"}


def kernel_key(name: str) -> str:
    """An HLO instruction name as the profiler names its kernel (``.``/``-`` -> ``_``)."""
    return name.replace(".", "_").replace("-", "_")


def short_op_name(op_name: str) -> str:
    """``op_name`` without the jit/while/eval_jaxpr prefix of a training chunk."""
    return re.sub(r"^.*(eval_jaxpr/|while/body/)", "", op_name)


def read_instructions(hlo_text: str, body_only: bool = False):
    """``[(name, shape, opcode, op_name, group)]`` of the program's instructions (``group``:
    the ``deduplicated_name`` of the instructions that share one compiled kernel, else the
    instruction's own name); with ``body_only`` only the main loop body's (the training
    chunk's step), if it has one."""
    lines = hlo_text.split("\n")
    if body_only:
        body = re.search(r"body=%([\w.\-]+)", hlo_text)
        starts = [i for i, line in enumerate(lines)
                  if body and line.startswith("%" + body.group(1) + " ")]
        if starts:
            lines = lines[starts[0] + 1:]
            lines = lines[:next((i for i, line in enumerate(lines) if line.startswith("}")),
                                len(lines))]
    out = []
    for line in lines:
        m = INSTRUCTION.match(line)
        if not m or m.group(3) in SKIP_OPS:
            continue
        name, shape, opcode = m.groups()
        op = re.search(r'op_name="([^"]*)"', line)
        dedup = re.search(r'deduplicated_name="([^"]*)"', line)
        out.append((name, shape, opcode, short_op_name(op.group(1)) if op else "",
                    dedup.group(1) if dedup else name))
    return out


def kernel_of_group(instructions, profile):
    """``{group: profiled kernel name}``: the profiler names a shared kernel after one of
    its instructions (not necessarily the ``deduplicated_name``)."""
    names = {k["name"].split("::", 1)[-1] for k in profile["kernels"]}
    out = {}
    for name, _, _, _, group in instructions:
        for candidate in (kernel_key(name), kernel_key(group)):
            if candidate in names:
                out.setdefault(group, candidate)
    return out


def kernel_rows(instructions, profile, steps: float):
    """One row per profiled kernel: ``{kernel, us_per_step, launches_per_step, shape,
    ops}`` with the most frequent op names of the instructions that run it."""
    kernel = kernel_of_group(instructions, profile)
    by_kernel = collections.defaultdict(list)
    for name, shape, opcode, op, group in instructions:
        if group in kernel:
            by_kernel[kernel[group]].append((shape, op))
    rows = []
    for k in profile["kernels"]:
        name = k["name"].split("::", 1)[-1]
        inst = by_kernel.get(name, [])
        ops = collections.Counter(re.sub(r"block_\d+", "block_*", op) for _, op in inst)
        rows.append({"kernel": name, "us_per_step": 1e3 * k["ms_per_call"] / steps,
                     "launches_per_step": k["count_per_call"] / steps,
                     "shape": inst[0][0] if inst else "",
                     "ops": [f"{op} x{n}" for op, n in ops.most_common(3)]})
    return rows


def block_rows(instructions, profile, text: str):
    """Every instruction whose op name contains ``text``, in program order, with the
    per-launch microseconds of its kernel (None where the kernel is not in the profile,
    e.g. instructions fused into another's kernel or cuBLAS calls)."""
    per_launch = {k["name"].split("::", 1)[-1]: 1e3 * k["ms_per_call"] / k["count_per_call"]
                  for k in profile["kernels"] if k["count_per_call"]}
    kernel = kernel_of_group(instructions, profile)
    return [{"instruction": name, "opcode": opcode, "shape": shape, "op": op,
             "us_per_launch": per_launch.get(kernel.get(group, ""))}
            for name, shape, opcode, op, group in instructions if text in op]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("hlo")
    ap.add_argument("profile")
    ap.add_argument("--steps", type=float, default=1.0,
                    help="training steps per profiled call (seeds_profile.py: --steps, 50)")
    ap.add_argument("--block", default="", help="list one block's instructions instead")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    with open(args.hlo) as f:
        hlo = f.read()
    with open(args.profile) as f:
        profile = json.load(f)
    instructions = read_instructions(hlo, body_only=True)
    if args.block:
        rows = block_rows(instructions, profile, args.block)
        for r in rows:
            us = "" if r["us_per_launch"] is None else f"{r['us_per_launch']:7.1f}"
            print(f"{us:>7} {r['instruction'][:34]:34} {r['opcode'][:11]:11} "
                  f"{r['shape'][:50]:50} {r['op'][:90]}")
    else:
        rows = kernel_rows(instructions, profile, args.steps)
        total = sum(r["us_per_step"] for r in rows)
        print(f"total {total:.1f} us per step, "
              f"{sum(r['launches_per_step'] for r in rows):.1f} kernels per step")
        for r in rows[:args.top]:
            print(f"{r['us_per_step']:8.1f} {r['launches_per_step']:6.1f} {r['kernel'][:34]:34} "
                  f"{r['shape'][:40]:40} {'; '.join(r['ops'])[:120]}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
