"""SPECTRE SBM: 57 % V.U.N. at 64 steps on average over training seeds (49-65.5 % over 13 runs),
below DiGress and DeFoG (docs/results.md, "SPECTRE SBM").

    ddgjax-train --config spectre_sbm --workdir runs/sbm
    ddgjax-sample --workdir runs/sbm

The SPECTRE Planar-64 recipe on 44-187 nodes: size buckets 64,96,128,187 with the
187-node bucket padded to 192 inside the model, 2000 epochs (sample validity peaks at
epoch 1500-1900 and falls after), model selection by SBM validity, sampled from
checkpoints/best_val with the logits scaled by 0.9.
"""
from ddgjax.configs import spectre_planar_64


def get_config():
    config = spectre_planar_64.get_config()
    config.data.source = "spectre_sbm"
    config.data.buckets = "64,96,128,187"
    config.model.ppgn.pad_multiple = 32
    config.train.num_epochs = 2000
    config.sample.logit_scale = 0.9
    config.sample.checkpoint = "best_val"
    config.validation.validity = "sbm"
    return config
