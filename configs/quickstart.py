"""Quick start on a CPU: built-in Community-small, a small PPGN, about a minute."""
from ddgjax.configs import default


def get_config():
    config = default.get_config()
    config.data.source = "builtin:community_small"
    config.model.ppgn.hidden = 16
    config.model.ppgn.num_blocks = 4
    config.train.num_epochs = 150
    config.train.checkpoint_every_epochs = 25
    config.sample.num_samples = 64
    config.sample.batch_size = 64
    return config
