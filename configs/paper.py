"""The paper's experiments (REFERENCE.md §3): one function, thin files per run.

Datasets are the paper's exact graph lists, read from ``$DDGJAX_DATA``
(default ``../shared/data``, relative to the working directory); point
``--config.data.source`` elsewhere to use another copy.
"""
import os

from configs import default

DATA_DIR = os.environ.get("DDGJAX_DATA", "../shared/data")

# dataset -> (file, PPGN hidden, PPGN blocks, epochs)
DATASETS = {
    "community_small": ("community_small.json", 32, 6, 5000),
    "ego_small": ("ego_small.json", 32, 6, 5000),
    "sbm_27": ("sbm_27.json", 32, 6, 5000),
    "planar_60": ("planar_60.json", 128, 8, 2500),
}


def paper_config(dataset: str, model: str, loss: str):
    """Config of one row of the paper's Tables 1-2.

    PPGN sizes follow the original code's configs (6 x 32 for the small sets,
    8 x 128 for Planar-60); EDP-GNN uses the paper's setup (5 layers, 4 GIN
    steps, 4 channels, 16 features) and T = 256 on Planar-60.
    """
    config = default.get_config()
    fname, hidden, blocks, epochs = DATASETS[dataset]
    config.data.source = os.path.join(DATA_DIR, fname)
    config.model.name = model
    config.model.ppgn.hidden = hidden
    config.model.ppgn.num_blocks = blocks
    config.diffusion.loss = loss
    config.diffusion.num_timesteps = 256 if (model == "edp" and dataset == "planar_60") else 32
    config.train.num_epochs = epochs
    config.train.batch_size = 64
    config.train.checkpoint_every_epochs = 100
    config.train.log_every_epochs = 50
    return config
