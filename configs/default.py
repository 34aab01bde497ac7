"""Default configuration: PPGN, L_simple, Community-small generated in-process.

Every other config imports this one and overrides what differs. All keys are
listed here, so a typo on the command line (``--config.train.lr=...``) is an
error rather than a silently ignored setting.
"""
import ml_collections


def get_config():
    config = ml_collections.ConfigDict()

    config.data = ml_collections.ConfigDict()
    # A path (JSON graph list, directory of edge lists, GraphML, pickle with
    # allow_pickle) or "builtin:NAME" for a generated dataset.
    config.data.source = "builtin:community_small"
    config.data.seed = 0            # seed of built-in generators
    config.data.max_nodes = 0       # 0: the largest graph of the dataset
    config.data.allow_pickle = False
    # Size buckets for training (docs/method.md, "Size buckets"): "" (off: every graph padded
    # to max_nodes), "K" (K buckets at quantiles of the training node counts) or sizes
    # "64,96,128,187" (max_nodes is always added as the last one). Each graph trains in the
    # smallest bucket that holds it, padded to that size, batch about B * (max_nodes/N_b)^2;
    # sampling groups graphs by the same buckets.
    config.data.buckets = ""
    # How an epoch orders the buckets' steps: "random" (a seeded interleaving, one jitted
    # call per step) or "sizes" (bucket by bucket, smallest first, in every epoch: a chunk
    # of epochs runs as one program, and several seeds in one program can use buckets).
    config.data.bucket_order = "random"

    config.model = ml_collections.ConfigDict()
    config.model.name = "ppgn"      # "ppgn", "edp" or "gt" (graph transformer)
    config.model.compute_dtype = "float32"  # or "bfloat16" (parameters stay float32)
    # noise_features: "linear" (the raw noise level, the paper's) or "log" (plus a log-scale
    # channel that resolves low noise levels).
    # walk_features: K > 0 adds K random-walk channels log(1 + n (D^-1 A_t)^k), k = 1..K
    # (0: none; discrete diffusion only).
    # spectral_features: K > 0 adds K channels n v_k v_k^T, the projectors on the 2nd..(K+1)-th
    # eigenvectors of the normalised Laplacian of A_t (0: none; discrete diffusion only).
    # self_condition: one more input channel, the model's own earlier estimate of A_0
    # (self-conditioning: training feeds its first-pass estimate to half the graphs, the
    # sampler the previous step's; discrete diffusion only; False: none).
    # dropout: p > 0 drops entries of every block's output with probability p in training
    # (0: none, the paper's).
    # norm: each block's normalisation, "instance" (per graph and channel, the paper's) or
    # "layer" (per entry over the channels: keeps absolute counts readable).
    # remat: recompute each block in the backward pass (less memory at large N).
    # film: condition every block on the noise level and node count by FiLM (per-graph
    # scale and shift of each block's norm output; off: the paper's diagonal channel only).
    # fused: the block with fewer passes over memory (same parameters and function);
    # pallas: its two pair MLPs as one Pallas kernel and the mixing layer with the norm
    # statistics as another (bfloat16 on a GPU; sampling and training).
    # fp8_weights: train (and sample) with the weights that the float8 samplers store in
    # float8 rounded as they round them (quantisation-aware training; straight-through
    # gradient), so that DDGJAX_FP8_ACTIVATIONS=weights / weights_y keep the model's function.
    # fp8_activations: train (and sample) with every block's output rounded to float8 as
    # those settings store it (quantisation-aware training of the activations).
    # pad_multiple: m > 1 runs the blocks on the node count rounded up to a multiple of m
    # (padding inside the model: the same function and noise draws; e.g. 32 turns SPECTRE
    # SBM's 187-node bucket into 192, 1.6x faster on an H200; 1: off).
    config.model.ppgn = ml_collections.ConfigDict(dict(hidden=32, num_blocks=6,
                                                       noise_features="linear", walk_features=0,
                                                       spectral_features=0,
                                                       self_condition=False, dropout=0.0,
                                                       remat=False, film=False, norm="instance",
                                                       fused=False, pallas=False,
                                                       fp8_weights=False,
                                                       fp8_activations=False,
                                                       pad_multiple=1))
    config.model.edp = ml_collections.ConfigDict(
        dict(num_layers=5, gin_steps=4, channels=4, hidden=16))
    # graph transformer (ddgjax/models/transformer.py): layers, node / edge / graph widths,
    # heads; conditioned on the noise level (noise_features as the PPGN's) and log2(n);
    # walk_features: K random-walk channels of A_t as node and edge inputs (0: none).
    config.model.gt = ml_collections.ConfigDict(
        dict(num_layers=4, node_dim=64, edge_dim=32, heads=4, global_dim=32,
             noise_features="log", walk_features=0))

    config.diffusion = ml_collections.ConfigDict()
    config.diffusion.kind = "discrete"      # or "gaussian" (the score-model baseline)
    config.diffusion.num_timesteps = 32
    config.diffusion.schedule = "linear"    # or "cosine"
    config.diffusion.loss = "simple"        # "simple" (L_simple) or "vb" (L_vb)
    config.diffusion.continuous_time = False  # L_simple on beta_bar ~ U(0, 1/2) (PPGN only)
    # The prior A_T ~ ER(rho): "uniform" (rho = 1/2, the paper's bit flips) or "marginal"
    # (rho = the training split's edge density; every entry is kept with probability
    # 1 - 2 beta_bar_t, else redrawn from Bernoulli(rho)). prior_density 0: set from data.
    config.diffusion.prior = "uniform"
    config.diffusion.prior_density = 0.0
    # With continuous_time, how training draws beta_bar: "uniform" (U(0, 1/2)),
    # "power:GAMMA" (u^GAMMA / 2, u ~ U(0, 1): GAMMA > 1 trains more at low noise) or
    # "mid:GAMMA" (GAMMA > 1 trains more around beta_bar = 1/4; bitflip.training_levels).
    config.diffusion.train_grid = "uniform"
    # L_simple's weight per level: "bond_taylor" (1 - 2 beta_bar + 1/T, the paper's) or
    # "flat" (1: the plain cross-entropy of p(A_0 | A_t)).
    config.diffusion.simple_weighting = "bond_taylor"
    # Step-unrolled training (bitflip.unrolled_inputs): the probability that a training
    # graph's input is one step of the config's own sampler (sample.num_steps, grid,
    # algorithm, levers), taken by the model from a level above, instead of a draw of
    # q(A_t | A_0); needs L_simple in continuous time. 0: off (the paper's).
    config.diffusion.unroll_prob = 0.0
    # The Gaussian baseline's own keys (used only with kind="gaussian"; see docs/gaussian.md):
    # its alpha_bar schedule ("cosine" for any T, or DDPM's "linear", T >= 21), the sampler's
    # eta (1: ancestral DDPM steps, 0: deterministic DDIM) and clipping of the x0 estimate.
    config.diffusion.gaussian = ml_collections.ConfigDict(
        dict(schedule="cosine", eta=1.0, clip_x0=True))

    config.train = ml_collections.ConfigDict()
    config.train.seed = 0
    config.train.batch_size = 64
    config.train.num_epochs = 5000
    config.train.lr = 1e-3
    config.train.lr_decay_per_epoch = 0.999   # the paper's "weight decay 0.999"
    config.train.b1 = 0.9
    config.train.b2 = 0.999
    config.train.grad_clip = 0.0              # 0: no clipping (the paper)
    # > 0: AdamW, every parameter (biases too) shrunk by lr * weight_decay per step; 0: Adam.
    # Not the paper's "weight decay 0.999", which is lr_decay_per_epoch above.
    config.train.weight_decay = 0.0
    config.train.ema_decay = 0.0              # 0: no EMA (the paper)
    # True: inside a jitted chunk the steps update the parameters, the EMA and Adam's
    # moments as one flat vector each (the same formulas in a few GPU kernels instead of
    # several per parameter leaf; equal up to float rounding); False: leaf by leaf.
    # Checkpoints are the same either way.
    config.train.flat_update = True
    # True: a fresh run compiles its first training chunk in a background thread while it
    # initialises its parameters (the same program, found in JAX's compilation cache by
    # the first call); False: the first call compiles it. Results are the same either way.
    config.train.precompile = True
    # True: the training chunks compile with XLA's concurrent kernel schedule
    # (training.CONCURRENT_KERNELS: independent kernels of a step may run side by side), which
    # speeds up small, launch-bound models on GPUs (Ego-small's step -20 % on an H200) and
    # slows large ones (Planar-60's PPGN 8 x 128: +2-5 %, +19 % memory). The same computation.
    config.train.concurrent_kernels = False
    config.train.checkpoint_every_epochs = 50
    config.train.log_every_epochs = 10

    config.sample = ml_collections.ConfigDict()
    # 0: by loss (vb -> Algorithm 1, simple -> Algorithm 2); 3: the de-randomised chain
    # (each pair drawn once from p(A_0 | A_t), at its own level; bitflip.reverse_step)
    config.sample.algorithm = 0
    config.sample.num_steps = 0     # 0: all T levels; fewer strides over them
    # Levels the sampler visits: "trained" (strided trained levels), or, for models
    # trained in continuous time, "uniform" or "power:GAMMA" (beta_bar_k = (k/K)^GAMMA / 2,
    # GAMMA > 1: more steps at low noise) for any num_steps.
    config.sample.grid = "trained"
    config.sample.argmax_last = False  # the last step takes the most likely A_0
    config.sample.final_pass = False   # one more denoiser call at beta_bar = 0 on A_0
    # Hybrids (steps from beta_bar <= level use Algorithm 1 / 2; 0: off), and the levers of
    # bitflip.reverse_step: per-pair mixing of Algorithm 2's draw into Algorithm 1 steps,
    # and a factor on the denoiser's logits.
    config.sample.alg1_below = 0.0
    config.sample.alg2_below = 0.0
    config.sample.renoise_mix = 0.0
    config.sample.logit_scale = 1.0
    config.sample.logit_scale_above = 0.0  # logit_scale only at noise levels >= this (0: all)
    # DeFoG's target guidance omega in Algorithm 1 steps (0: off; bitflip.target_guidance_prob1)
    config.sample.target_guidance = 0.0
    config.sample.batch_size = 1024
    config.sample.num_samples = 1024
    config.sample.seed = 0
    config.sample.use_ema = False

    # Model selection by samples (ddgjax/validation.py): every `every_epochs` epochs (0: off;
    # a multiple of train.checkpoint_every_epochs) sample `num_samples` graphs with the
    # config.sample settings (num_steps 0: config.sample.num_steps), score them against
    # the validation split (or the first `num_reference` training graphs where there is
    # none) and keep the best as checkpoints/best_val. metric: "mmd" (average MMD) or
    # "valid" (fraction valid under `validity`, "planar" or "sbm"; ties by MMD).
    config.validation = ml_collections.ConfigDict()
    config.validation.every_epochs = 0
    config.validation.num_samples = 64
    config.validation.num_steps = 0
    config.validation.num_reference = 64
    config.validation.validity = ""
    config.validation.metric = "mmd"
    return config
