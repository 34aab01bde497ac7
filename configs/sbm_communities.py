"""sbm_communities: SBM-L graphs asked for by their number of communities (conditional
generation on a property; docs/conditional.md, "Results").
    ddgjax-train --config sbm_communities --workdir runs/sbm_k
    ddgjax-sample --workdir runs/sbm_k --property communities=3
The SBM-L recipe conditioned on each graph's block count k (2-5, recorded by the
generator), the condition dropped with probability 0.1 in training. Measured (H100, 30
epochs = 3,300 steps, 64 steps, w = 0): 81 / 78 / 77 / 34 % of the samples have the
requested k = 2 / 3 / 4 / 5 blocks in graph-tool's fit; guidance does not help on
average (docs/conditional.md, "Results").
"""
from ddgjax.configs import sbm_l


def get_config():
    config = sbm_l.get_config()
    config.condition.on = "communities"
    config.condition.dropout = 0.1
    config.train.num_epochs = 30              # as measured (the SBM-L recipe's earlier length)
    config.train.lr_decay_per_epoch = 0.9355
    config.train.checkpoint_every_epochs = 5
    return config
