"""A trained model as one portable file: the parameters sampling uses, in half precision,
with the run's config and data record, read without pickle.

    python -m ddgjax.pretrained export --workdir runs/p64 --out p64.npz   # write one
    ddgjax.load("pretrained:p64.npz").sample(40, seed=0)                   # use it
    ddgjax-sample --pretrained p64.npz --out samples/

The file is a NumPy ``.npz`` archive: ``param/<path>`` arrays (float16; each leaf of the
parameter tree, ``/``-joined keys) and ``meta``, the UTF-8 bytes of a JSON object
(``format``, the run's ``config`` and ``dataset`` record, the checkpoint it came from, its
epoch, and a free ``note`` such as the card and the numbers it gave). It is read with
``allow_pickle=False``; any fault (a damaged file, another format, a parameter missing or
of another shape) is a :class:`PretrainedError` naming the file and the field.
Models shipped with the package live in ``ddgjax/pretrained_models/NAME.npz`` and are
loaded by name (:func:`names`).
"""
from __future__ import annotations

import json
import os
import zipfile

import jax
import numpy as np

from ddgjax.conditioning import record_dim
from ddgjax.configuration import complete_run_config
from ddgjax.data import NodeCountDistribution
from ddgjax.models import abstract_params, model_from_config
from ddgjax.processes import process_from_config
from ddgjax.sampling import Run, load_run, sampling_config

FORMAT = "ddgjax-pretrained-1"
PREFIX = "pretrained:"
MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained_models")


class PretrainedError(ValueError):
    """A pretrained file cannot be used; the message names it (one line)."""


def names() -> dict[str, str]:
    """The models shipped with the package (``ddgjax/pretrained_models/*.npz``), name ->
    the headline its note records (what it is, the numbers it gave, the card), in name
    order."""
    return {name: str(read_meta(os.path.join(MODELS_DIR, f"{name}.npz"))
                      .get("note", {}).get("headline", "")) for name in _shipped()}


def _shipped() -> list[str]:
    """The shipped models' names (the files in :data:`MODELS_DIR`), sorted."""
    if not os.path.isdir(MODELS_DIR):
        return []
    return sorted(f[:-4] for f in os.listdir(MODELS_DIR) if f.endswith(".npz"))


def resolve(spec: str) -> str:
    """The file of ``spec``: a shipped model's name or a path to an ``.npz`` file."""
    spec = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    shipped = _shipped()
    if spec in shipped:
        return os.path.join(MODELS_DIR, f"{spec}.npz")
    if os.path.isfile(spec):
        return spec
    raise PretrainedError(f"{spec}: neither a shipped pretrained model "
                          f"({', '.join(shipped) or 'none shipped'}) nor an .npz file")


def _leaf_key(path) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)


def export(workdir: str, out: str, checkpoint: str | None = None, use_ema: bool | None = None,
           note: dict | None = None) -> dict:
    """Write the parameters ``ddgjax-sample`` would use for the run in ``workdir`` (its
    config's checkpoint and EMA choice unless given) to ``out`` as float16, with its
    config and data record; returns the meta written."""
    run = load_run(workdir, checkpoint, use_ema=use_ema)
    leaves = jax.tree_util.tree_flatten_with_path(run.params)[0]
    arrays = {f"param/{_leaf_key(p)}": np.asarray(v, np.float32).astype(np.float16)
              for p, v in leaves}
    worst = max(float(np.max(np.abs(a.astype(np.float32) - np.asarray(v, np.float32))))
                for a, (_, v) in zip(arrays.values(), leaves))
    meta = {"format": FORMAT, "config": json.loads(run.config.to_json_best_effort()),
            "dataset": run.dataset, "checkpoint": run.checkpoint,
            "checkpoint_epoch": run.meta.get("epoch"),
            "use_ema": bool(run.config.sample.get("use_ema", False)
                            if use_ema is None else use_ema),
            "max_abs_rounding": worst, "note": note or {}}
    _write(out, arrays, meta)
    return meta


def _write(path: str, arrays: dict, meta: dict) -> None:
    """``arrays`` (``param/...``) and ``meta`` as one compressed ``.npz`` at ``path``,
    written beside it first and moved into place (a killed write leaves the old file)."""
    arrays = {**arrays, "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    tmp = f"{path}.tmp{os.getpid()}.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def _read_arrays(path: str, only_meta: bool = False) -> dict:
    try:
        with np.load(path, allow_pickle=False) as f:
            keys = [k for k in f.files if k == "meta"] if only_meta else f.files
            return {k: f[k] for k in keys}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise PretrainedError(f"{path}: not a readable pretrained file "
                              f"({type(e).__name__}: {e})") from e


def read_meta(path: str) -> dict:
    """The ``meta`` object of a pretrained file (checked as :func:`read` does)."""
    return _checked_meta(path, _read_arrays(path, only_meta=True))


def read(path: str) -> tuple[dict, dict]:
    """``(meta, {param key: float16 array})`` of a pretrained file; PretrainedError (one
    line naming the file) if it cannot be read or is not of this :data:`FORMAT`."""
    arrays = _read_arrays(path)
    meta = _checked_meta(path, arrays)
    return meta, {k[len("param/"):]: v for k, v in arrays.items() if k.startswith("param/")}


def write_note(path: str, note: dict) -> dict:
    """Merge ``note`` into the file's ``meta.note`` (rewritten in place, parameters
    untouched); returns the new meta."""
    arrays = _read_arrays(path)
    meta = _checked_meta(path, arrays)
    meta["note"] = {**meta.get("note", {}), **note}
    _write(path, {k: v for k, v in arrays.items() if k != "meta"}, meta)
    return meta


def _checked_meta(path: str, arrays: dict) -> dict:
    if "meta" not in arrays:
        raise PretrainedError(f"{path}: no 'meta' entry (not a ddgjax pretrained file)")
    try:
        meta = json.loads(arrays["meta"].tobytes().decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise PretrainedError(f"{path}: field 'meta': not JSON ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise PretrainedError(f"{path}: field 'meta.format': expected {FORMAT!r}, got {got!r} "
                              "(written by another version of ddgjax?)")
    for field in ("config", "dataset"):
        if not isinstance(meta.get(field), dict):
            raise PretrainedError(f"{path}: field 'meta.{field}': expected an object")
    return meta


def load_pretrained(spec: str, *, compute_dtype: str | None = None, kernels: str | None = None,
                    pad_multiple: int | None = None) -> Run:
    """A :class:`ddgjax.sampling.Run` from a pretrained file or shipped name (parameters
    in float32); the keywords change how the model computes, as for ``load_run``."""
    path = resolve(spec)
    meta, stored = read(path)
    try:
        config = complete_run_config(meta["config"], f"{path}: meta.config")
        config = sampling_config(config, compute_dtype, kernels, pad_multiple)
        record = meta["dataset"]
        max_nodes = int(record["max_nodes"])
        node_counts = NodeCountDistribution.from_dict(record["node_counts"])
        model = model_from_config(config, cond_dim=record_dim(record))
        abstract = abstract_params(model, max_nodes)
    except (KeyError, TypeError, ValueError) as e:
        raise PretrainedError(f"{path}: field 'meta': {e}") from e
    paths, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    leaves = []
    for p, want in paths:
        key = _leaf_key(p)
        if key not in stored:
            raise PretrainedError(f"{path}: parameter {key!r} is missing")
        if tuple(stored[key].shape) != tuple(want.shape):
            raise PretrainedError(f"{path}: parameter {key!r} has shape "
                                  f"{tuple(stored[key].shape)}, the model's is {tuple(want.shape)}")
        leaves.append(np.asarray(stored[key], np.float32))
    params = jax.tree_util.tree_unflatten(treedef, leaves)
    return Run(config, model, process_from_config(config),
               params, max_nodes, node_counts, {"epoch": meta.get("checkpoint_epoch")},
               record, f"pretrained ({meta.get('checkpoint')})", None)


def main(argv=None) -> int:
    """``python -m ddgjax.pretrained export --workdir W --out FILE [--checkpoint K]``,
    ``... note --file FILE --note JSON``, ``... list``."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m ddgjax.pretrained")
    sub = p.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write a run's sampling parameters to one file")
    ex.add_argument("--workdir", required=True)
    ex.add_argument("--out", required=True)
    ex.add_argument("--checkpoint", choices=("best", "latest", "best_val"), default=None)
    ex.add_argument("--note", default="{}", help="a JSON object stored with the weights")
    nt = sub.add_parser("note", help="merge a JSON object into a file's note")
    nt.add_argument("--file", required=True)
    nt.add_argument("--note", required=True, help="a JSON object")
    sub.add_parser("list", help="the shipped models and their headlines")
    args = p.parse_args(argv)
    from ddgjax.cli import report_error, user_errors

    if args.command == "list":
        for name, headline in names().items():
            print(f"{name}: {headline}")
        return 0
    try:
        note = json.loads(args.note)
        if not isinstance(note, dict):
            raise json.JSONDecodeError("not an object", args.note, 0)
        if args.command == "note":
            write_note(args.file, note)
            print(f"updated the note of {args.file}", file=sys.stderr)
            return 0
        meta = export(args.workdir, args.out, args.checkpoint, note=note)
    except json.JSONDecodeError as e:
        return report_error(f"--note: expected a JSON object ({e})")
    except user_errors() as e:
        return report_error(e)
    print(f"wrote {args.out} ({meta['checkpoint']} checkpoint, epoch "
          f"{meta['checkpoint_epoch']}; float16 rounding at most {meta['max_abs_rounding']:.2g})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
