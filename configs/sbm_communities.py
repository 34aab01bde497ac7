"""sbm_communities: SBM-L graphs asked for by their number of communities (conditional
generation on a property; docs/results.md, "Conditional generation").
    ddgjax-train --config sbm_communities --workdir runs/sbm_k
    ddgjax-sample --workdir runs/sbm_k --property communities=3 --guidance 1
The SBM-L recipe conditioned on each graph's block count k (2-5, recorded by the
generator), the condition dropped with probability 0.1 in training. Measured so far: 5 of
the 30 epochs (550 steps), where 9-38 % of the samples have the requested block count
(docs/results.md, "Conditional generation").
"""
from ddgjax.configs import sbm_l


def get_config():
    config = sbm_l.get_config()
    config.condition.on = "communities"
    config.condition.dropout = 0.1
    return config
