"""planar_60 / edp / L_simple with the paper's hyper-parameters (see configs/paper.py)."""
from configs.paper import paper_config


def get_config():
    return paper_config("planar_60", "edp", "simple")
