"""Sample a trained run into a directory: graphs, pictures and, against the test
split, the MMDs. The library side of ``sample.py``.

A sample directory holds ``samples.json`` (the JSON graph-list format, with the
sampling settings under ``generated_by``), ``grid.png`` (generated vs training
graphs), optionally ``graphml/`` (one file per graph) and ``chain.png`` (the
reverse chain of a few graphs), and, where the dataset has a test split and a
protocol is asked for, ``eval.json``.

A sample directory is written whole into a fresh sibling directory and then
swapped in for the old one (:func:`replace_dir`), so no file of an earlier run
survives beside the new ones, and an interrupted run leaves the old directory as
it was. :func:`check_output_dir` refuses a directory that holds anything else
(sampling replaces it whole) or that cannot be written, before a model is loaded.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Callable

import networkx as nx
import numpy as np

from ddgjax.data import benchmark_evaluation, load_dataset, write_graph_list
from ddgjax.interrupts import deferred
from ddgjax.plotting import chain_rows, draw_graph_grid
from ddgjax.reporting import write_json_atomic
from ddgjax.sampling import Run, SamplingError, generate
from ddgjax.workdir import ensure_writable_dir

# Everything write_sample_dir (or write_completion_dir) may write; a directory holding other entries is not replaced.
SAMPLE_ENTRIES = ("samples.json", "grid.png", "chain.png", "eval.json", "graphml")


def check_output_dir(out_dir: str, kind: str = "samples", overwrite: bool = False) -> None:
    """Raise SamplingError (one line) unless ``out_dir`` can be (re)placed by a directory of
    ``kind`` (``"samples"`` or ``"completions"``): its parent must be writable; an existing
    ``out_dir`` must be a directory holding only :data:`SAMPLE_ENTRIES`, and, unless
    ``overwrite``, not outputs of the other kind; it must not hold the working directory."""
    out_dir = os.path.abspath(out_dir)
    cwd = os.path.abspath(os.getcwd())
    if cwd == out_dir or cwd.startswith(out_dir.rstrip(os.sep) + os.sep):
        raise SamplingError(f"{out_dir}: the output directory holds the current directory "
                            f"({cwd}), which writing it would replace; choose another --out")
    if os.path.exists(out_dir):
        if not os.path.isdir(out_dir):
            raise SamplingError(f"{out_dir}: output path exists and is not a directory")
        foreign = sorted(set(os.listdir(out_dir)) - set(SAMPLE_ENTRIES))
        if foreign:
            raise SamplingError(
                f"{out_dir}: holds files sampling did not write ({', '.join(foreign[:5])}"
                f"{', ...' if len(foreign) > 5 else ''}); sampling replaces its output directory "
                "whole, so choose a new or empty --out")
        held = output_kind(out_dir)
        if held is not None and held != kind and not overwrite:
            raise SamplingError(f"{out_dir}: holds {held}, not {kind}; pass --overwrite to "
                                "replace them, or choose another --out")
    ensure_writable_dir(os.path.dirname(out_dir), what="output directory's parent")


def output_kind(out_dir: str) -> str | None:
    """``"samples"`` or ``"completions"``: what the ``samples.json`` in ``out_dir`` holds
    (None without a readable one)."""
    import json

    try:
        with open(os.path.join(out_dir, "samples.json")) as f:
            task = (json.load(f).get("generated_by") or {}).get("task")
    except (OSError, ValueError, AttributeError):
        return None
    return "completions" if task == "completion" else "samples"


def staging_dir(final_dir: str) -> str:
    """A fresh sibling of ``final_dir`` to write into before :func:`replace_dir`, with the
    permissions a plain ``mkdir`` would give (``mkdtemp``'s 0700 would outlive the swap)."""
    out = tempfile.mkdtemp(prefix=f".{os.path.basename(final_dir)}.new-",
                           dir=os.path.dirname(final_dir))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out, 0o777 & ~umask)
    return out


def replace_dir(new_dir: str, target: str) -> None:
    """Put directory ``new_dir`` at ``target``, replacing what is there (two renames,
    SIGINT/SIGTERM held meanwhile); the old directory is deleted after the swap."""
    with deferred():
        old = None
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-",
                                   dir=os.path.dirname(target))
            os.rename(target, os.path.join(old, "d"))
        os.rename(new_dir, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def model_settings(run) -> dict:
    """How the model computed the samples (``sampling.sampling_config``'s settings, the
    run's own unless overridden): ``compute_dtype`` and, for PPGN, ``kernels`` and
    ``pad_multiple``. ``kernels`` is what ran: ``"pallas"`` only in bfloat16 on a GPU (the
    PPGN takes its XLA path elsewhere, whatever the config asks)."""
    import jax

    model = run.config.model
    out = {"compute_dtype": model.compute_dtype}
    if model.name == "ppgn":
        ran_kernels = (model.ppgn.get("kernels", "xla") == "pallas"
                       and model.compute_dtype == "bfloat16" and jax.default_backend() == "gpu")
        out.update(kernels="pallas" if ran_kernels else "xla",
                   pad_multiple=int(model.ppgn.get("pad_multiple", 1)))
    return out


def write_sample_dir(run: Run, out_dir: str, *, num_samples: int, seed: int, batch_size: int,
                     num_steps: int | None = None, sampler_options: dict | None = None,
                     graphml: bool = False, chain_png: int = 0, protocol: str | None = None,
                     validity: str | None = None, record: dict | None = None,
                     reference: str | None = None, overwrite: bool = False,
                     progress: Callable[[int, int], None] | None = None) -> dict:
    """Sample ``num_samples`` graphs of ``run`` into ``out_dir``; returns a summary dict.

    ``record`` (e.g. the workdir) is stored with the samples, beside the checkpoint
    and every sampler and model setting.
    The summary has the sampling settings and speed (``info``), the generated
    graphs (``graphs``), and the evaluation (``eval``, or None when skipped).
    ``out_dir`` is replaced whole (see the module docstring). ``protocol`` (``"none"``: no
    ``eval.json``) and ``validity`` (``"planar"``, ``"sbm"``; ``"none"``: no V.U.N.) default
    to the run's benchmark
    (``ddgjax.data.benchmark_evaluation``: SPECTRE's protocol and V.U.N. for the SPECTRE
    sets, the paper's protocol elsewhere). ``reference`` (``PATH[:SPLIT]``, as
    ``ddgjax-evaluate --reference``) scores against those graphs, with novelty against the
    file's train split, instead of the run's own data (:func:`run_data`). ``overwrite``
    lets the samples replace a directory of completions.
    """
    sampler_options = sampler_options or {}
    bench_protocol, bench_validity = benchmark_evaluation(run.config.data.source)
    protocol = protocol or bench_protocol
    validity = validity or bench_validity
    validity = None if validity == "none" else validity
    out_dir = os.path.abspath(out_dir)
    check_output_dir(out_dir, "samples", overwrite)
    train, test = evaluation_data(run, reference, needed=protocol != "none")
    label = sampler_options.get("label")
    if label is not None:   # a class's samples are scored against that class's graphs
        train, test = of_class(train, label), of_class(test, label)
    res = generate(run, num_samples, seed=seed, batch_size=batch_size, num_steps=num_steps,
                   progress=progress, **sampler_options)
    graphs = res["graphs"]
    info = {**(record or {}), "checkpoint": run.checkpoint,
            "checkpoint_epoch": run.meta.get("epoch"), "seed": seed,
            "algorithm": res["algorithm"], "num_steps": res["num_steps"],
            "num_samples": num_samples, "graphs_per_second": res["graphs_per_second"],
            "compile_seconds": res["compile_seconds"], "sampler": res["sampler"],
            "model_settings": model_settings(run)}
    final_dir, out_dir = out_dir, staging_dir(out_dir)
    try:
        ev = _write_outputs(run, out_dir, graphs, info, res, train, test, seed=seed,
                            num_steps=num_steps,
                            sampler_options=sampler_options, graphml=graphml,
                            chain_png=chain_png, protocol=protocol, validity=validity)
        replace_dir(out_dir, final_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)  # left only if something failed
    return {"info": info, "result": res, "graphs": graphs, "eval": ev}


def of_class(graphs, label):
    """The graphs of class ``label`` (``g.graph["label"]``, matched as text); all of
    ``graphs`` where none carries it (data without labels), None for None."""
    if graphs is None:
        return None
    return [g for g in graphs if str(g.graph.get("label")) == str(label)] or graphs


def evaluation_data(run: Run, reference: str | None, needed: bool) -> tuple:
    """``(train, test)`` graph lists that samples of ``run`` are drawn beside and scored
    against: the graphs of ``reference`` (``PATH[:SPLIT]``) and its file's train split, or
    else the run's own data (:func:`run_data`); ``(None, None)`` where those are not to be
    had and not ``needed``."""
    if reference:
        from ddgjax.data import select_split
        from ddgjax.evaluate import load_graphs

        test, f, _ = load_graphs(reference, "--reference")
        return select_split(f, "train"), test
    ds = run_data(run, needed)
    return (None, None) if ds is None else (ds.train, ds.test)


def run_data(run: Run, needed: bool = True):
    """The run's dataset wherever it lies now: a bundled or builtin source as named, a file
    at the absolute path its ``dataset.json`` records (else the source as written, for
    runs recorded before paths were), checked against the record's content digest.
    Returns None, when not ``needed``, where it is gone or changed; raises SamplingError
    (one line naming the record, the path and ``--reference`` as the way out) when needed."""
    from ddgjax import input_pipeline

    cfg, record = run.config, run.dataset or {}
    source = path = cfg.data.source
    where = os.path.join(run.workdir or ".", "dataset.json")
    way_out = ("pass --reference FILE:test (the data where they are now) or --protocol none "
               "(no eval.json)")
    if input_pipeline.data_path(source) is not None:
        path = record.get("path") or os.path.abspath(os.path.expanduser(source))
        if not os.path.exists(path):
            if not needed:
                return None
            raise SamplingError(f"{where}: the run's data {path} are not there any more "
                                f"(moved, or another machine); {way_out}")
    ds = load_dataset(path, allow_pickle=cfg.data.get("allow_pickle", False))
    if record.get("data_digest") and input_pipeline.data_digest(ds) != record["data_digest"]:
        if not needed:
            return None
        raise SamplingError(f"{where}: the graphs at {path} differ from those the run was "
                            f"trained on (data_digest); {way_out}")
    return ds


def _write_outputs(run: Run, out_dir: str, graphs: list, info: dict, res: dict,
                   train: list | None, test: list | None, *, seed: int,
                   num_steps, sampler_options: dict, graphml: bool, chain_png: int,
                   protocol: str, validity: str | None) -> dict | None:
    """Write the files of a sample directory into ``out_dir``; returns the evaluation or None."""
    write_graph_list(os.path.join(out_dir, "samples.json"), graphs, name="samples",
                     generated_by=info)
    if graphml:
        gdir = os.path.join(out_dir, "graphml")
        os.makedirs(gdir, exist_ok=True)
        for i, g in enumerate(graphs):
            nx.write_graphml(g, os.path.join(gdir, f"sample_{i:05d}.graphml"))
    rows = [("generated", graphs[:8])] + ([("training", train[:8])] if train else [])
    draw_graph_grid(os.path.join(out_dir, "grid.png"), rows)
    if chain_png > 0:
        ch = generate(run, chain_png, seed=seed, batch_size=chain_png, num_steps=num_steps,
                      return_chain=True, **sampler_options)
        draw_graph_grid(os.path.join(out_dir, "chain.png"), chain_rows(ch["chain"],
                                                                        ch["num_nodes"]))
    ev = None
    if protocol != "none" and test:
        from ddgjax.metrics import evaluate_generated

        t0 = time.time()
        ev = evaluate_generated(graphs, test, protocol=protocol, train=train,
                                validity=validity)
        ev["eval_seconds"] = time.time() - t0
        ev.update(info)
        write_json_atomic(os.path.join(out_dir, "eval.json"), ev)
    return ev


def write_completion_dir(run: Run, out_dir: str, requests: list, *, num_samples: int, seed: int,
                         batch_size: int, num_steps: int | None = None,
                         sampler_options: dict | None = None, resample_jump: int = 0,
                         resample_rounds: int = 0, record: dict | None = None,
                         where=None, overwrite: bool = False, progress=None) -> dict:
    """Complete every ``(adjacency, known)`` request ``num_samples`` times into ``out_dir``
    (replaced whole, as ``write_sample_dir``): ``samples.json`` holds the completions, those of
    input 0 first, with the settings and ``source_index`` (the input of each completion)
    under ``generated_by``; ``grid.png`` shows inputs (known edges only) beside completions.
    Returns ``{"info", "result"}``."""
    from ddgjax.completion import complete

    out_dir = os.path.abspath(out_dir)
    check_output_dir(out_dir, "completions", overwrite)
    res = complete(run, requests, num_samples, seed=seed, batch_size=batch_size,
                   num_steps=num_steps, resample_jump=resample_jump,
                   resample_rounds=resample_rounds, where=where, progress=progress,
                   **(sampler_options or {}))
    graphs = [g for per_input in res["graphs"] for g in per_input]
    info = {**(record or {}), "checkpoint": run.checkpoint,
            "checkpoint_epoch": run.meta.get("epoch"), "seed": seed,
            "task": "completion", "num_inputs": len(requests),
            "samples_per_input": num_samples, "sampler": res["sampler"],
            "seconds": res["seconds"], "model_settings": model_settings(run),
            "source_index": [g for g in range(len(requests)) for _ in range(num_samples)]}
    final_dir, out_dir = out_dir, staging_dir(out_dir)
    try:
        write_graph_list(os.path.join(out_dir, "samples.json"), graphs, name="completions",
                         generated_by=info)
        inputs = [nx.from_numpy_array(((np.asarray(a) != 0) & np.asarray(k, bool)).astype(np.uint8))
                  for a, k in requests[:8]]
        draw_graph_grid(os.path.join(out_dir, "grid.png"),
                        [("known part", inputs),
                         ("completed", [res["graphs"][g][0] for g in range(len(inputs))])])
        replace_dir(out_dir, final_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"info": info, "result": res}
