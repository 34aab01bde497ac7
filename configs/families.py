"""families: one model for two graph families, asked for by label (conditional generation,
docs/results.md, "Conditional generation").
    ddgjax-train --config families --workdir runs/families
    ddgjax-sample --workdir runs/families --label spectre_sbm --guidance 1
The SPECTRE SBM recipe (PPGN 8x128, size buckets, 64 steps) on SPECTRE Planar-64 and
SPECTRE SBM together, each graph labelled by its dataset (``mix:``), the label dropped
with probability 0.1 in training (classifier-free guidance); 1000 epochs of both sets, the
last checkpoint, no validation. Measured so far: 600 epochs (3,000 steps, 208 s on an
H100), which pick the family (sizes, edge counts) but give no valid planar graphs; the
single-family recipes train 10,000-20,000 steps (docs/results.md, "Conditional
generation").
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
