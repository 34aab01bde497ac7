"""families: one model for two graph families, asked for by label (conditional generation,
docs/conditional.md, "Results").
    ddgjax-train --config families --workdir runs/families
    ddgjax-sample --workdir runs/families --label spectre_sbm --guidance 0.5
The SPECTRE SBM recipe (PPGN 8x128, size buckets, 64 steps) on SPECTRE Planar-64 and
SPECTRE SBM together, each graph labelled by its dataset (``mix:``), the label dropped
with probability 0.1 in training (classifier-free guidance); at most 32 graphs a step in
every bucket (without the cap all planar graphs share one step: 0 % valid planar
requests after 3,000 steps), 2000 epochs = 20,000 steps, the last checkpoint, no
validation. Measured (H100, 64 steps): planar requests 87.7 / 89.2 / 86.2 / 55.0 %
valid at w = 0 / 0.5 / 1 / 2 (Planar-64 alone: 97 %), SBM requests 43.8 / 62.5 / 60.9 /
53.1 % (SBM alone: 57 % mean).
"""
from ddgjax.configs import spectre_sbm


def get_config():
    config = spectre_sbm.get_config()
    config.data.source = "mix:spectre_planar_64,spectre_sbm"
    config.condition.on = "label"
    config.condition.dropout = 0.1
    config.data.bucket_max_batch = 32
    config.train.num_epochs = 2000
    config.sample.checkpoint = "latest"
    config.sample.logit_scale = 1.0
    config.validation.every_epochs = 0
    config.validation.validity = ""
    return config
