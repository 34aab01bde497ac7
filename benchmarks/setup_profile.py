"""Where a training run's set-up goes, before its first step (issue 12).

    python benchmarks/setup_profile.py --out setup.json [--config ego_small_ppgn_simple]

On the H200 the Ego-small paper config spends 7-9 s between the train call and the
training loop (docs/benchmarks.md, round 16). This script runs the same set-up as
``training.train`` step by step in a fresh workdir and reports, as JSON:

* ``parts_s``: wall seconds of each part: ``setup`` (config, data, model, process, mesh,
  optimizer: ``training._Setup``), ``run`` (restart checks, parameter init, optimizer
  state, validator: ``training._Run``), ``replicate`` (the state onto the devices),
  ``begin`` (run record, metrics log, checkpoint writer), ``device_data`` (the training
  split onto the devices);
* ``compiles``: every XLA compilation in those parts: count and seconds, grouped by the
  ddgjax lines that asked for it (the three innermost ddgjax frames);
* ``device``, ``jax``.

The backend is started before the timings (as ``seeds_speed.py`` does). ``--init``
swaps how the parameters are initialised, for a comparison in fresh processes (one
variant per process, so each compiles cold):

* ``eager`` (what ddgjax does, ``models.init_params``): ``model.init`` on the host CPU
  where the default backend is another, as one jitted program since round 33, then the
  parameters moved over;
* ``hostop``: ``model.init`` op by op on the host CPU (ddgjax in rounds 17-32);
* ``device``: ``model.init`` op by op on the default device (ddgjax before round 17,
  which also traced graphs of the data's size, not ``models.INIT_NODES``);
* ``jit``: one jitted ``lazy_init`` (the initializers only, no forward pass);
* ``cpu``: the same as ``eager`` now (round 17's name for it, when it was a variant).

Round 17 (one H200, Ego-small PPGN): ``eager`` (then on the device) 8.4 s of set-up with
91 compiles, ``jit`` 12.0 s (one 10.5 s compile), ``cpu`` 4.5 s; ddgjax now does ``cpu``.

    for v in eager hostop device jit; do python benchmarks/setup_profile.py --init $v --out setup_$v.json; done
"""
import argparse
import collections
import json
import os
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from ddgjax import training  # noqa: E402
from ddgjax.configuration import get_config  # noqa: E402


def record_compiles(log: list):
    """Wrap JAX's backend compile so that each call appends ``(seconds, where)`` to ``log``.
    A private JAX hook: where it is missing, nothing is recorded (the parts still are)."""
    try:
        from jax._src import compiler
    except ImportError:
        return False
    original = getattr(compiler, "backend_compile_and_load", None)
    if original is None:
        return False

    def wrapped(*args, **kwargs):
        t0 = time.time()
        out = original(*args, **kwargs)
        frames = [f for f in traceback.extract_stack() if f"{os.sep}ddgjax{os.sep}" in f.filename]
        where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
                            for f in reversed(frames[-3:])) or "(outside ddgjax)"
        log.append((time.time() - t0, where))
        return out

    compiler.backend_compile_and_load = wrapped
    return True


def use_init(variant: str) -> None:
    """Make ``training.init_state`` initialise parameters the ``variant`` way."""
    if variant in ("eager", "cpu"):
        return
    from ddgjax import models
    from ddgjax.models import _dummy_inputs

    def jit_init(model, key, max_nodes):
        shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in _dummy_inputs(max_nodes)]
        return jax.jit(lambda k: model.lazy_init(k, *shapes))(key)

    def host_op_by_op(model, key, max_nodes):
        cpu = jax.devices("cpu")[0]
        with jax.default_device(cpu):
            params = models._init_here(model, jax.device_put(key, cpu), max_nodes)
        return jax.tree_util.tree_map(jax.numpy.asarray, jax.device_get(params))

    training.init_params = {"jit": jit_init, "device": models._init_here,
                            "hostop": host_op_by_op}[variant]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="ego_small_ppgn_simple",
                    help="bundled config name or FILE[:ARG] (default: ego_small_ppgn_simple)")
    ap.add_argument("--out", default="", help="write the results here (JSON)")
    ap.add_argument("--init", choices=("eager", "hostop", "device", "jit", "cpu"), default="eager",
                    help="how to initialise the parameters (module docstring)")
    args = ap.parse_args()
    use_init(args.init)
    jax.numpy.zeros(1).block_until_ready()
    log: list = []
    hooked = record_compiles(log)
    cfg = get_config(args.config)
    workdir = tempfile.mkdtemp(prefix="setup-profile-")
    parts = {}
    t = time.time()
    setup = training._Setup(cfg, None, workdir)
    parts["setup"] = time.time() - t
    t = time.time()
    run = training._Run(setup, setup.config, workdir, True, False)
    jax.block_until_ready(run.state)
    parts["run"] = time.time() - t
    t = time.time()
    jax.block_until_ready(training.replicate(run.state, setup.mesh))
    parts["replicate"] = time.time() - t
    t = time.time()
    writer = run.begin()
    parts["begin"] = time.time() - t
    t = time.time()
    jax.block_until_ready(setup.device_data())
    parts["device_data"] = time.time() - t
    writer.close()
    groups = collections.defaultdict(lambda: [0, 0.0])
    for dt, where in log:
        groups[where][0] += 1
        groups[where][1] += dt
    dev = jax.devices()[0]
    result = {"config": args.config, "init": args.init,
              "device": f"{len(jax.devices())} x {dev.device_kind}",
              "jax": jax.__version__, "parts_s": parts, "total_s": sum(parts.values()),
              "compiles_recorded": hooked, "num_compiles": len(log),
              "compile_s": sum(dt for dt, _ in log),
              "compiles": [{"where": w, "count": n, "seconds": s}
                           for w, (n, s) in sorted(groups.items(), key=lambda x: -x[1][1])]}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
