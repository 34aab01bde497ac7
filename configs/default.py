"""Default configuration: every key a run has, with the paper's settings.

A PPGN trained with L_simple on the built-in Community-small generator. Every other
config imports this one and overrides what differs; because every key is listed
here, a typo on the command line (``--config.train.lrr=1``) is an error, not a
silently ignored setting. ``docs/method.md`` explains each setting beside the paper.
"""
import ml_collections


def get_config():
    config = ml_collections.ConfigDict()

    config.data = ml_collections.ConfigDict()
    # A JSON graph list (.json or .json.gz), a directory of edge lists, a GraphML file,
    # a pickle (with allow_pickle), a bundled dataset name ("planar_60") or
    # "builtin:community_small" (generated in-process).
    config.data.source = "builtin:community_small"
    config.data.max_nodes = 0           # 0: the largest graph of the dataset
    config.data.allow_pickle = False    # pickles can run code: only for files you trust
    # Size buckets: "" (off: every graph padded to max_nodes), "K" (K buckets at quantiles
    # of the training node counts) or sizes "64,96,128,187". docs/method.md, "Size buckets".
    config.data.buckets = ""
    # Training batches of a bucket hold as many padded pairs as `train.batch_size` graphs at
    # max_nodes (small graphs: large batches); a positive value caps them at this many graphs.
    config.data.bucket_max_batch = 0

    config.model = ml_collections.ConfigDict()
    config.model.name = "ppgn"                # "ppgn" or "edp"
    config.model.compute_dtype = "float32"    # or "bfloat16" (parameters stay float32)
    config.model.ppgn = ml_collections.ConfigDict()
    config.model.ppgn.hidden = 32
    config.model.ppgn.num_blocks = 6
    config.model.ppgn.noise_features = "linear"  # or "log": adds a log-scale noise channel
    config.model.ppgn.remat = False           # recompute blocks in the backward pass
    config.model.ppgn.kernels = "xla"         # or "pallas": GPU kernels (ddgjax/kernels)
    # m > 1 runs the blocks on the node count rounded up to a multiple of m (the same
    # function; e.g. 32 makes SPECTRE SBM's 187-node bucket 192 nodes, 1.6x faster).
    config.model.ppgn.pad_multiple = 1
    config.model.edp = ml_collections.ConfigDict(
        dict(num_layers=5, gin_steps=4, channels=4, hidden=16))

    config.diffusion = ml_collections.ConfigDict()
    config.diffusion.kind = "discrete"        # or "gaussian" (the score-model baseline)
    config.diffusion.num_timesteps = 32
    config.diffusion.loss = "simple"          # "simple" (L_simple) or "vb" (L_vb)
    # True: L_simple on beta_bar drawn from train_grid instead of the T-level grid (PPGN).
    config.diffusion.continuous_time = False
    # "uniform": beta_bar ~ U(0, 1/2); "power:G": u^G / 2 (G > 1 trains more at low noise).
    config.diffusion.train_grid = "uniform"
    # The prior A_T ~ ER(rho): "uniform" (rho = 1/2, the paper's bit flips) or "marginal"
    # (rho = the training split's edge density).
    config.diffusion.prior = "uniform"
    config.diffusion.prior_density = 0.0  # rho of the marginal prior; 0: set from the data
    # The Gaussian baseline's sampler: eta 1 ancestral DDPM steps, 0 deterministic DDIM.
    config.diffusion.gaussian = ml_collections.ConfigDict(dict(eta=1.0))

    config.train = ml_collections.ConfigDict()
    config.train.seed = 0
    config.train.batch_size = 64
    config.train.num_epochs = 5000
    config.train.lr = 1e-3                    # Adam (b1 0.9, b2 0.999)
    config.train.lr_decay_per_epoch = 0.999   # the paper's "weight decay 0.999"
    config.train.ema_decay = 0.0              # 0: no EMA of the parameters
    config.train.checkpoint_every_epochs = 50

    config.sample = ml_collections.ConfigDict()
    config.sample.algorithm = 0     # 0: by loss (vb -> Algorithm 1, simple -> 2), or 1, 2
    config.sample.num_steps = 0     # 0: all T levels; fewer stride over them
    # The levels visited: "trained" (strided trained levels) or, for continuous-time
    # models, "uniform" or "power:G" (beta_bar_k = (k/K)^G / 2, more steps at low noise).
    config.sample.grid = "trained"
    config.sample.renoise_mix = 0.0  # Algorithm 1: per pair, take Algorithm 2's draw
    config.sample.logit_scale = 1.0  # a factor on the denoiser's logits
    config.sample.checkpoint = "best"  # "best" (training loss), "latest" or "best_val"
    config.sample.use_ema = False
    config.sample.batch_size = 1024
    config.sample.num_samples = 1024
    config.sample.seed = 0

    # Conditional generation (ddgjax/conditioning.py): condition on each graph's class
    # label and/or named properties; training drops the condition with probability
    # `dropout` (the null condition), so that one model is conditional and unconditional.
    config.condition = ml_collections.ConfigDict()
    config.condition.on = ""        # "label", property names, or both: "label,communities"
    config.condition.dropout = 0.1

    # Model selection by samples (checkpoints/best_val): every `every_epochs` epochs (0: off)
    # sample `num_samples` graphs with the sample settings and score them against the
    # validation split; metric "mmd" (average MMD) or "valid" (the share valid under
    # `validity`, "planar" or "sbm"; ties by MMD).
    config.validation = ml_collections.ConfigDict()
    config.validation.every_epochs = 0
    config.validation.num_samples = 64
    config.validation.validity = ""
    config.validation.metric = "mmd"
    return config
