"""community_small: the paper's PPGN with L_simple, our best row: avg MMD 0.016 (paper 0.023)
(docs/results.md, "The paper's tables").

    ddgjax-train --config community_small --workdir runs/community_small
    ddgjax-sample --workdir runs/community_small

The paper's configuration (configs/paper.py:community_small,ppgn,simple), sampled as the paper did
(Algorithm 2, all T = 32 levels) from the checkpoint with the lowest training loss.
"""
from ddgjax.configs import paper


def get_config():
    return paper.get_config("community_small,ppgn,simple")
