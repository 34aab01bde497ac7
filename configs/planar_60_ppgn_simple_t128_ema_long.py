"""Variant (issue 5): as planar_60_ppgn_simple_t128, trained longer (4000
epochs) with an EMA of the weights (decay 0.999) used for sampling."""
from configs.planar_60_ppgn_simple_t128 import get_config as t128_config


def get_config():
    config = t128_config()
    config.train.num_epochs = 4000
    config.train.ema_decay = 0.999
    config.sample.use_ema = True
    return config
