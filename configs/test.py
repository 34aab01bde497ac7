"""A CPU-friendly test configuration: tiny model, a few epochs, tiny dataset."""
from ddgjax.configs import default


def get_config():
    config = default.get_config()
    config.data.source = "builtin:community_small"
    config.model.ppgn.hidden = 8
    config.model.ppgn.num_blocks = 2
    config.model.edp.num_layers = 2
    config.model.edp.gin_steps = 2
    config.model.edp.channels = 2
    config.model.edp.hidden = 8
    config.model.gt.update(num_layers=2, node_dim=8, edge_dim=4, heads=2, global_dim=4)
    config.diffusion.num_timesteps = 8
    config.train.batch_size = 16
    config.train.num_epochs = 4
    config.train.checkpoint_every_epochs = 2
    config.train.log_every_epochs = 1
    config.sample.batch_size = 16
    config.sample.num_samples = 16
    return config
