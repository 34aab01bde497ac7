"""Train a graph diffusion model: the same command as ``ddgjax-train``
(``ddgjax/cli/train.py``; ``python train.py --help`` lists the flags).

    python train.py --config configs/paper.py:community_small,ppgn,simple --workdir runs/cs
    python train.py --config ego_small_ppgn_simple --workdir runs/ego
"""
from ddgjax.cli.train import run

if __name__ == "__main__":
    run()
