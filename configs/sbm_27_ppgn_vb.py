"""sbm_27 / ppgn / L_vb with the paper's hyper-parameters (see configs/paper.py)."""
from configs.paper import paper_config


def get_config():
    return paper_config("sbm_27", "ppgn", "vb")
