"""PolyGraph's Planar-L (8,192 training graphs of 64 nodes): the Planar-64 recipe in steps.

    ddgjax-train --config planar_l --workdir runs/planar_l
    ddgjax-sample --workdir runs/planar_l --num_samples 4096

The SPECTRE Planar-64 recipe (``spectre_planar_64``) with its optimizer counted in steps:
64x more graphs per epoch, so 80 epochs (20,480 steps of 32 graphs, the Planar-64
recipe's 20,000) and a learning-rate decay per epoch that ends at the same factor
(0.939^80 = 0.999^5000). Sampled as Planar-64: Algorithm 2, 64 steps on the
power:3 grid, the last checkpoint's EMA parameters.
"""
from ddgjax.configs import spectre_planar_64


def get_config():
    config = spectre_planar_64.get_config()
    config.data.source = "planar_l"
    config.train.num_epochs = 80
    config.train.lr_decay_per_epoch = 0.939
    config.train.checkpoint_every_epochs = 10
    config.validation.every_epochs = 0    # no model selection by samples: the last one
    config.sample.num_samples = 4096      # the test split's size
    return config
