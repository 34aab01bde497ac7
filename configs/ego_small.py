"""ego_small: the paper's PPGN with L_simple sampled with Algorithm 1, our best row: avg MMD
0.0148 (the paper: 0.016; docs/results.md, "Ego-small").

    ddgjax-train --config ego_small --workdir runs/ego_small
    ddgjax-sample --workdir runs/ego_small

The paper's configuration (configs/paper.py:ego_small,ppgn,simple), sampled over all
T = 32 levels with Algorithm 1 instead of the paper's Algorithm 2 (which reaches 0.0205),
from the checkpoint with the lowest training loss.
"""
from ddgjax.configs import paper


def get_config():
    config = paper.get_config("ego_small,ppgn,simple")
    config.sample.algorithm = 1
    return config
