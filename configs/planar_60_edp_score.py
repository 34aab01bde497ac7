"""planar_60 / edp / Gaussian baseline ("EDP-Score" of the paper's tables).

The paper's hyper-parameters for planar_60 and edp (configs/paper.py), with the
continuous-state process of ddgjax/gaussian.py: T = 1000 levels (the paper's
"1000 steps"), cosine alpha_bar schedule, epsilon-prediction, ancestral DDPM
sampling over all 1000 levels by default (--num_steps K strides). docs/gaussian.md.
"""
from configs.paper import paper_config


def get_config():
    config = paper_config("planar_60", "edp", "simple")
    config.diffusion.kind = "gaussian"
    config.diffusion.num_timesteps = 1000
    return config
