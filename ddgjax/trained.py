"""A trained model as a Python object: ``ddgjax.load(workdir)`` returns a
:class:`TrainedModel`, whose methods use it (``sample`` now; graph completion and
likelihoods belong here too, as further methods on the same object)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from ddgjax.sampling import Run, generate, load_run


class TrainedModel:
    """A run loaded from its workdir: config, denoiser, noise process and parameters.

    Attributes:
      workdir: where it was loaded from; checkpoint: ``"best"`` or ``"latest"``;
      config: the run's ConfigDict; meta: the checkpoint's meta (epoch, step, loss);
      max_nodes: the largest graph it can make; run: the underlying
      :class:`ddgjax.sampling.Run`.
    """

    def __init__(self, run: Run, workdir: str, checkpoint: str):
        self.run, self.workdir, self.checkpoint = run, workdir, checkpoint

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
                       num_steps=num_steps or cfg.num_steps or None, node_counts=counts,
                       **sampler_options)
        return res["graphs"]


def load(workdir: str, checkpoint: str = "best", use_ema: bool | None = None) -> TrainedModel:
    """Load the ``best`` (lowest training loss) or ``latest`` checkpoint of a run.

    ``use_ema=None`` follows ``config.sample.use_ema``. Raises
    ``ddgjax.sampling.SamplingError`` (one line naming the workdir or checkpoint,
    and which checkpoints exist) when it cannot.
    """
    return TrainedModel(load_run(workdir, checkpoint, use_ema=use_ema), workdir, checkpoint)
