"""SPECTRE Community-20: average EMD-kernel MMD 1.7x the train/test floor (docs/results.md,
"SPECTRE Community-20").

    ddgjax-train --config spectre_comm20 --workdir runs/comm20
    ddgjax-sample --workdir runs/comm20 --protocol spectre_emd

The SPECTRE Planar-64 recipe on 12-20 nodes, model selection by the average MMD
(no validity rule), sampled from checkpoints/best_val with 128 steps, 20 graphs per seed.
"""
from ddgjax.configs import spectre_planar_64


def get_config():
    config = spectre_planar_64.get_config()
    config.data.source = "spectre_comm20"
    config.sample.num_steps = 128
    config.sample.checkpoint = "best_val"
    config.sample.num_samples = 20
    config.validation.validity = ""
    config.validation.metric = "mmd"
    return config
