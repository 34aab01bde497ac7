"""sbm_27: the paper's PPGN with L_vb, our best row: avg MMD 0.0039 (paper's best 0.038)
(docs/results.md, "The paper's tables").

    ddgjax-train --config sbm_27 --workdir runs/sbm_27
    ddgjax-sample --workdir runs/sbm_27

The paper's configuration (configs/paper.py:sbm_27,ppgn,vb), sampled as the paper did
(Algorithm 1, all T = 32 levels) from the checkpoint with the lowest training loss.
"""
from ddgjax.configs import paper


def get_config():
    return paper.get_config("sbm_27,ppgn,vb")
