"""ego_small / ppgn / Gaussian baseline ("PPGN-Score" of the paper's tables).

The paper's hyper-parameters for ego_small and ppgn (configs/paper.py), with the
continuous-state process of ddgjax/gaussian.py: T = 1000 levels (the paper's
"1000 steps"), cosine alpha_bar schedule, epsilon-prediction, ancestral DDPM
sampling over all 1000 levels by default (--num_steps K strides). docs/gaussian.md.
"""
from configs.paper import paper_config


def get_config():
    config = paper_config("ego_small", "ppgn", "simple")
    config.diffusion.kind = "gaussian"
    config.diffusion.num_timesteps = 1000
    return config
