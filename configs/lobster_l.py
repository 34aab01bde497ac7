"""PolyGraph's Lobster-L (8,192 training graphs, random lobsters of 10-100 nodes).

    ddgjax-train --config lobster_l --workdir runs/lobster_l
    ddgjax-sample --workdir runs/lobster_l

The Planar-L recipe (``planar_l``: PPGN 8 x 128, L_simple in continuous time, the
marginal prior, bfloat16, EMA 0.999, 64 sampling steps of Algorithm 2 on the power:3
grid, the last checkpoint) with size buckets 32,48,64,80,100 (the node counts are spread
evenly over 10-100) and 40 epochs. A lobster is valid when it is a tree whose leaves,
removed twice, leave a path.
"""
from ddgjax.configs import planar_l


def get_config():
    config = planar_l.get_config()
    config.data.source = "lobster_l"
    config.data.buckets = "32,48,64,80,100"
    config.train.num_epochs = 40
    config.train.lr_decay_per_epoch = 0.88     # 0.88^40 = 0.999^5000
    config.train.checkpoint_every_epochs = 10
    config.validation.validity = "lobster"
    return config
