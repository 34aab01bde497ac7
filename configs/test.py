"""A CPU-friendly test configuration: tiny model, a few epochs, tiny dataset."""
from ddgjax.configs import default


def get_config():
    config = default.get_config()
    config.data.source = "builtin:community_small"
    config.model.ppgn.hidden = 8
    config.model.ppgn.num_blocks = 2
    config.model.edp.update(num_layers=2, gin_steps=2, channels=2, hidden=8)
    config.diffusion.num_timesteps = 8
    config.train.batch_size = 16
    config.train.num_epochs = 4
    config.train.checkpoint_every_epochs = 2
    config.sample.batch_size = 16
    config.sample.num_samples = 16
    return config
