"""Variant (issue 5): Planar-60 PPGN L_simple trained on T=128 levels (the original
code's Planar config) and sampled with 32 strided steps; bfloat16 compute."""
from configs.paper import paper_config


def get_config():
    config = paper_config("planar_60", "ppgn", "simple")
    config.diffusion.num_timesteps = 128
    config.sample.num_steps = 32
    config.model.compute_dtype = "bfloat16"
    return config
