"""A trained model as a Python object: ``ddgjax.load(workdir)`` returns a
:class:`TrainedModel`, whose methods use it: ``sample`` (new graphs), ``complete``
(graph completion: the unknown pairs of a partly known graph) and ``nll`` / ``elbo``
(likelihood bounds of given graphs)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from ddgjax.sampling import Run, configured_num_steps, generate, load_run


class TrainedModel:
    """A run loaded from its workdir: config, denoiser, noise process and parameters.

    Attributes:
      workdir: where it was loaded from; checkpoint: ``"best"``, ``"latest"`` or
      ``"best_val"``; config: the run's ConfigDict; meta: the checkpoint's meta (epoch,
      step, loss); max_nodes: the largest graph it can make; run: the underlying
      :class:`ddgjax.sampling.Run`.
    """

    def __init__(self, run: Run, workdir: str):
        self.run, self.workdir = run, workdir

    @property
    def checkpoint(self) -> str:
        return self.run.checkpoint

    @property
    def config(self):
        return self.run.config

    @property
    def meta(self) -> dict:
        return self.run.meta

    @property
    def max_nodes(self) -> int:
        return self.run.max_nodes

    def __repr__(self) -> str:
        return (f"TrainedModel({self.workdir!r}, checkpoint={self.checkpoint!r}, "
                f"model={self.config.model.name!r}, epoch={self.meta.get('epoch')})")

    def sample(self, n: int, seed: int = 0, *, num_nodes=None, num_steps: int | None = None,
               batch_size: int | None = None, label=None, properties: dict | None = None,
               guidance: float | None = None, **sampler_options) -> list[nx.Graph]:
        """``n`` generated graphs (``networkx.Graph``, nodes ``0..k-1``).

        Node counts are drawn from the training split (seeded by ``seed``) unless
        ``num_nodes`` (``int[n]``, or one int for all) is given. ``num_steps``
        (default: the config's, else all levels), ``batch_size`` (default:
        ``config.sample.batch_size``) and sampler options (bit flips: ``algorithm``,
        ``grid``, ``renoise_mix``, ``logit_scale``; default: the run's ``config.sample``)
        work as in ``ddgjax-sample``. Graph ``i`` depends only on
        ``seed`` and ``i``, not on ``n`` or the batch size.

        A model trained with labels (``config.condition``) makes graphs of class ``label``
        and/or with ``properties`` (e.g. ``{"communities": 3}``), with classifier-free
        guidance of weight ``guidance`` (default 0: none); node
        counts then come from the training graphs of that class. Without either it samples
        its unconditional model.
        """
        cfg = self.config.sample
        counts = None
        if num_nodes is not None:
            counts = np.broadcast_to(np.asarray(num_nodes, dtype=np.int32), (n,))
        res = generate(self.run, n, seed=seed, batch_size=batch_size or cfg.batch_size,
                       num_steps=configured_num_steps(self.config, num_steps),
                       node_counts=counts, label=label, properties=properties,
                       guidance=guidance, **sampler_options)
        return res["graphs"]

    def complete(self, adjacency, known, num_samples: int = 16, seed: int = 0, *,
                 num_steps: int | None = None, batch_size: int | None = None,
                 resample_jump: int = 0, resample_rounds: int = 0,
                 **sampler_options) -> list[nx.Graph]:
        """``num_samples`` completions of one partly known graph (``networkx.Graph`` each).

        ``adjacency`` is an ``[n, n]`` 0/1 array, ``known`` an ``[n, n]`` boolean mask,
        symmetric (the diagonal is ignored). The unknown pairs are sampled from the model
        while the known ones stay exactly as given (``ddgjax.processes.bitflip.inpainting``).
        ``resample_jump``/``resample_rounds`` turn on RePaint resampling (walk each block
        of ``resample_jump`` levels ``resample_rounds + 1`` times). ``num_steps``,
        ``batch_size`` and sampler options work as in :meth:`sample`. Completion ``i``
        depends only on ``seed`` and ``i``. For the common masks see
        ``ddgjax.completion.extend_graph`` and ``hide_pairs``; for many graphs at once,
        ``ddgjax.completion.complete``.
        """
        from ddgjax.completion import complete

        cfg = self.config.sample
        res = complete(self.run, [(adjacency, known)], num_samples, seed=seed,
                       batch_size=batch_size or cfg.batch_size,
                       num_steps=configured_num_steps(self.config, num_steps),
                       resample_jump=resample_jump, resample_rounds=resample_rounds,
                       where=lambda g: "", **sampler_options)
        return res["graphs"][0]

    def elbo(self, graphs, num_samples: int = 8, seed: int = 0, *, num_levels: int | None = None,
             grid: str | None = None, algorithm: int = 1, batch_size: int = 64) -> dict:
        """The negative ELBO of ``graphs`` with its details: bits per pair and per graph,
        Monte-Carlo standard errors, per-level bits, the levels used
        (``ddgjax.likelihood.nll``; ``num_samples`` is the number of draws per level)."""
        from ddgjax.likelihood import nll

        return nll(self.run, graphs, num_draws=num_samples, seed=seed, batch_size=batch_size,
                   num_levels=num_levels, grid=grid, algorithm=algorithm)

    def nll(self, graphs, num_samples: int = 8, seed: int = 0, **options) -> np.ndarray:
        """Bits per pair of each graph (``float64[G]``): the negative ELBO, an upper bound on
        ``-log2 p_theta(graph)``, divided by the graph's ``n (n - 1) / 2`` pairs.

        ``graphs``: ``networkx.Graph`` objects or ``[n, n]`` 0/1 adjacencies. ``num_samples``
        draws of ``A_t ~ q(A_t | A_0)`` per level; ``options`` (``num_levels``, ``grid``,
        ``algorithm``, ``batch_size``) as for :meth:`elbo`, which also returns the standard
        errors.
        """
        return self.elbo(graphs, num_samples, seed, **options)["bits_per_pair"]


def load(workdir: str, checkpoint: str | None = None, use_ema: bool | None = None, *,
         compute_dtype: str | None = None, kernels: str | None = None,
         pad_multiple: int | None = None) -> TrainedModel:
    """Load a checkpoint of a run: ``"best"`` (lowest training loss), ``"latest"`` or
    ``"best_val"`` (best samples on held-out graphs); None: the run's
    ``config.sample.checkpoint``, the one its recipe samples.

    ``use_ema=None`` follows ``config.sample.use_ema``. ``compute_dtype="bfloat16",
    kernels="pallas"`` samples with the fast path (bfloat16 and, for PPGN, its Pallas
    kernels on a GPU; docs/performance.md); ``pad_multiple=m`` has the PPGN pad its node
    axis to a multiple of m inside the call (the same function; faster where the kernels
    tile that width better, ``config.model.ppgn.pad_multiple``); None keeps the run's own
    setting. Raises ``ddgjax.sampling.SamplingError`` (one line naming the workdir or
    checkpoint, and which checkpoints exist) when it cannot. ``"pretrained:FILE"`` (or
    ``"pretrained:NAME"`` of a shipped model) loads one portable file
    (``ddgjax.pretrained``).
    """
    if workdir.startswith("pretrained:"):   # one file (ddgjax.pretrained), no workdir
        from ddgjax.pretrained import load_pretrained

        if checkpoint is not None or use_ema is not None:
            raise ValueError(f"{workdir}: a pretrained file holds one set of parameters; "
                             "checkpoint and use_ema do not apply")
        return TrainedModel(load_pretrained(workdir, compute_dtype=compute_dtype,
                                            kernels=kernels, pad_multiple=pad_multiple),
                            workdir)
    return TrainedModel(load_run(workdir, checkpoint, use_ema=use_ema,
                                 compute_dtype=compute_dtype, kernels=kernels,
                                 pad_multiple=pad_multiple), workdir)
