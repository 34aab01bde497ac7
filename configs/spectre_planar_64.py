"""SPECTRE Planar-64: our best recipe, 97.0 % V.U.N. at 64 steps (docs/results.md, "SPECTRE Planar-64").

    ddgjax-train --config spectre_planar_64 --workdir runs/planar64
    ddgjax-sample --workdir runs/planar64        # the row's sampler, checkpoint and sample count

PPGN 8 x 128 with a log-scale noise channel, L_simple in continuous time on the power:2
grid, the marginal prior, bfloat16, batch 32, 5000 epochs, EMA 0.999; sampled from the last
checkpoint's EMA parameters with Algorithm 2, 64 steps on the power:3 grid. The other
SPECTRE configs (planar_60, spectre_sbm, spectre_comm20) start from this one.
"""
from ddgjax.configs import paper


def get_config():
    config = paper.get_config("planar_60,ppgn,simple")
    config.data.source = "spectre_planar_64"
    config.model.compute_dtype = "bfloat16"
    config.model.ppgn.noise_features = "log"
    config.model.ppgn.num_blocks = 8
    config.diffusion.continuous_time = True
    config.diffusion.num_timesteps = 128
    config.diffusion.train_grid = "power:2"
    config.diffusion.prior = "marginal"
    config.train.batch_size = 32
    config.train.num_epochs = 5000
    config.train.ema_decay = 0.999
    config.sample.algorithm = 2
    config.sample.num_steps = 64
    config.sample.grid = "power:3"
    config.sample.checkpoint = "latest"
    config.sample.use_ema = True
    config.sample.num_samples = 40        # the test split's size; seeds 0-4 give the row
    config.validation.every_epochs = 500  # checkpoints/best_val by the share of valid samples
    config.validation.num_samples = 128
    config.validation.validity = "planar"
    config.validation.metric = "valid"
    return config
