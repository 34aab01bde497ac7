"""A trained model as a Python object: ``ddgjax.load(workdir)`` returns a
:class:`TrainedModel`, whose methods use it: ``sample`` (new graphs), ``complete``
(graph completion: the unknown pairs of a partly known graph) and ``nll`` / ``elbo``
(likelihood bounds of given graphs)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from ddgjax.sampling import Run, SamplingError, configured_num_steps, generate, load_run


class TrainedModel:
    """A run loaded from its workdir: config, denoiser, noise process and parameters.

    Attributes:
      workdir: where it was loaded from; checkpoint: ``"best"`` or ``"latest"``;
      config: the run's ConfigDict; meta: the checkpoint's meta (epoch, step, loss);
      max_nodes: the largest graph it can make; run: the underlying
      :class:`ddgjax.sampling.Run`.
    """

    def __init__(self, run: Run, workdir: str, checkpoint: str, guide=None, ensemble=None):
        self.run, self.workdir, self.checkpoint = run, workdir, checkpoint
        self.guide = guide  # (TrainedModel, weight, above) of guided_by, else None
        self.ensemble = ensemble  # (other TrainedModels, mean) of ensembled_with, else None

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
        guided = ("" if self.guide is None else
                  f", guided_by={self.guide[0].workdir!r}, weight={self.guide[1]}, "
                  f"above={self.guide[2]}")
        if self.ensemble is not None:
            guided += (f", ensembled_with={[m.workdir for m in self.ensemble[0]]!r}, "
                       f"mean={self.ensemble[1]!r}")
        return (f"TrainedModel({self.workdir!r}, checkpoint={self.checkpoint!r}, "
                f"model={self.config.model.name!r}, epoch={self.meta.get('epoch')}{guided})")

    def guided_by(self, weak: "TrainedModel", weight: float, above: float = 0.0
                  ) -> "TrainedModel":
        """This model sampled with autoguidance by ``weak`` (``ddgjax.guidance``): each
        step uses ``good + weight (good - weak)`` for the denoiser's output, in the steps
        at noise levels ``>= above`` (bit flips; 0: all). A weight in [-1, 0) blends the
        two (-0.5: their mean). ``weak`` must be a run of the same noise process, data and
        ``max_nodes`` (else ``SamplingError`` naming the field). The result samples only:
        its ``complete`` and ``elbo`` raise ``SamplingError``."""
        from ddgjax.guidance import guided_run

        if not isinstance(weak, TrainedModel):
            raise SamplingError(f"guided_by: expected the weak model as a TrainedModel "
                                f"(ddgjax.load(workdir)), got {type(weak).__name__}")
        run = guided_run(self.run, weak.run, weight, guide_name=f"guide {weak.workdir}",
                         above=above)
        return TrainedModel(run, self.workdir, self.checkpoint,
                            guide=(weak, float(weight), float(above)))

    def ensembled_with(self, *others: "TrainedModel", mean: str = "probs") -> "TrainedModel":
        """This model and ``others`` sampled as an ensemble (``ddgjax.ensemble``): each
        step uses the mean of all members' probabilities (``mean="probs"``) or logits
        (``"logits"``), one forward pass per member. The others must be runs of the same
        bit-flip process, data and ``max_nodes`` (else ``SamplingError`` naming the field).
        The result samples only: its ``complete`` and ``elbo`` raise ``SamplingError``."""
        from ddgjax.ensemble import ensemble_run

        for o in others:
            if not isinstance(o, TrainedModel):
                raise SamplingError(f"ensembled_with: expected TrainedModels "
                                    f"(ddgjax.load(workdir)), got {type(o).__name__}")
        if self.guide is not None or any(o.guide is not None for o in others):
            raise SamplingError("ensembled_with: a model from guided_by() cannot join an "
                                "ensemble; ensemble the unguided models")
        run = ensemble_run(self.run, [o.run for o in others], mean,
                           names=[f"ensemble member {o.workdir}" for o in others])
        return TrainedModel(run, self.workdir, self.checkpoint, ensemble=(others, mean))

    def _refuse_guided(self, what: str) -> None:
        if self.guide is not None:
            raise SamplingError(f"{what}: a model from guided_by() samples only; call it on "
                                f"the unguided model ({self.workdir})")
        if self.ensemble is not None:
            raise SamplingError(f"{what}: a model from ensembled_with() samples only; call it "
                                f"on one member ({self.workdir})")

    def sample(self, n: int, seed: int = 0, *, num_nodes=None, num_steps: int | None = None,
               batch_size: int | None = None, **sampler_options) -> list[nx.Graph]:
        """``n`` generated graphs (``networkx.Graph``, nodes ``0..k-1``).

        Node counts are drawn from the training split (seeded by ``seed``) unless
        ``num_nodes`` (``int[n]``, or one int for all) is given. ``num_steps``
        (default: the config's, else all levels), ``batch_size`` (default:
        ``config.sample.batch_size``) and sampler options such as
        ``algorithm=1`` work as in ``ddgjax-sample``. Graph ``i`` depends only on
        ``seed`` and ``i``, not on ``n`` or the batch size.
        """
        cfg = self.config.sample
        counts = None
        if num_nodes is not None:
            counts = np.broadcast_to(np.asarray(num_nodes, dtype=np.int32), (n,))
        res = generate(self.run, n, seed=seed, batch_size=batch_size or cfg.batch_size,
                       num_steps=configured_num_steps(self.config, num_steps),
                       node_counts=counts,
                       **sampler_options)
        return res["graphs"]

    def complete(self, adjacency, known, num_samples: int = 16, seed: int = 0, *,
                 num_steps: int | None = None, batch_size: int | None = None,
                 resample_jump: int = 0, resample_rounds: int = 0,
                 **sampler_options) -> list[nx.Graph]:
        """``num_samples`` completions of one partly known graph (``networkx.Graph`` each).

        ``adjacency`` is an ``[n, n]`` 0/1 array, ``known`` an ``[n, n]`` boolean mask,
        symmetric (the diagonal is ignored). The unknown pairs are sampled from the model
        while the known ones stay exactly as given (``ddgjax.processes.inpainting``).
        ``resample_jump``/``resample_rounds`` turn on RePaint resampling (walk each block
        of ``resample_jump`` levels ``resample_rounds + 1`` times). ``num_steps``,
        ``batch_size`` and sampler options work as in :meth:`sample`. Completion ``i``
        depends only on ``seed`` and ``i``. For the common masks see
        ``ddgjax.completion.extend_graph`` and ``hide_pairs``; for many graphs at once,
        ``ddgjax.completion.complete``.
        """
        from ddgjax.completion import complete

        self._refuse_guided("complete")
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

        self._refuse_guided("elbo")
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


def load(workdir: str, checkpoint: str = "best", use_ema: bool | None = None, *,
         compute_dtype: str | None = None, pallas: bool | None = None,
         pad_multiple: int | None = None) -> TrainedModel:
    """Load the ``best`` (lowest training loss) or ``latest`` checkpoint of a run.

    ``use_ema=None`` follows ``config.sample.use_ema``. ``compute_dtype="bfloat16",
    pallas=True`` samples with the fast path (bfloat16 and, for PPGN, its Pallas
    kernels; docs/benchmarks.md); ``pad_multiple=m`` has the PPGN pad its node axis to
    a multiple of m inside the call (the same function; faster where the kernels tile
    that width better, ``config.model.ppgn.pad_multiple``); None keeps the run's own
    setting. Raises
    ``ddgjax.sampling.SamplingError`` (one line naming the workdir or checkpoint,
    and which checkpoints exist) when it cannot.
    """
    return TrainedModel(load_run(workdir, checkpoint, use_ema=use_ema,
                                 compute_dtype=compute_dtype, pallas=pallas,
                                 pad_multiple=pad_multiple),
                        workdir, checkpoint)
