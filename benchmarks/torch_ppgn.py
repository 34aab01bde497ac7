"""A PyTorch peer of ddgjax's PPGN, bit-flip sampler (Algorithm 2) and L_simple train step.

Benchmark-only code: ``benchmarks/bench_speed.py`` times it against ddgjax and, before
timing, checks with ``compare_with_ddgjax`` that it computes the same function as
ddgjax's PPGN with copied parameters (``check`` in its JSON; on a CPU:
``python -c "from benchmarks import torch_ppgn; print(torch_ppgn.compare_with_ddgjax())"``
from the repository root). ddgjax itself never imports torch.

The network is ddgjax's (``ddgjax/models/ppgn.py``, module docstring):

    X_0   = mask([A_t, s_t * I])                       # noise level(s) on the diagonal
    Y     = Dense_h(X_0)
    block k = 1..d:
        P = mask(m1(Y)) @ m2(Y) / sqrt(n)              # per channel, over the node axis
        Y = mask(InstanceNorm(Dense_h(concat[Y, P])))  # no affine, eps 1e-5, biased var
    Z     = Dense_h(concat[X_0, X_1, ..., X_d])
    Z     = Z + leaky_relu(Dense_h(Z))
    logits = mask_offdiag((L + L^T) / 2),  L = Dense_1(Z)

with ``m1``, ``m2`` = Dense -> leaky_relu(0.01) -> Dense. Every Dense over a
concatenation is a sum of partial products (the concatenation is never built), and the
readout sum is accumulated block by block.

Layouts (``layout=``), the same function either way:

* ``"cl"`` (default): pair features channels last ``[B, N, N, C]`` (``F.linear`` is one
  GEMM with the bias fused); ``m1``/``m2`` emit their last Dense channels first
  ``[B, C, N, N]`` (a batched GEMM reading the channels-last input transposed, no copy),
  so the per-channel product is one ``bmm`` over ``B*C``, and the mix layer reads the
  product back transposed. This is ddgjax's layout.
* ``"cf"``: everything channels first ``[B, C, N, N]`` (NCHW, as PyTorch PPGN code with
  1x1 convolutions has it); every Dense is a batched GEMM ``W @ x`` over the graphs.

Precision: float32 parameters; under ``torch.autocast(dtype=torch.bfloat16)`` the GEMMs
run in bfloat16, the biases are added in the activations' dtype, the instance-norm
statistics are float32 (its output is cast back to the activations' dtype), and the last
Dense(h -> 1) and the logits are float32, as in ddgjax with ``compute_dtype=bfloat16``.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

LOG_FLOOR = 1e-8  # as ddgjax.models.ppgn.LOG_FLOOR


def leaky(x):
    return F.leaky_relu(x, 0.01)


def noise_channels(noise_level: torch.Tensor, kind: str = "linear") -> torch.Tensor:
    """``float32[B] -> float32[B, C]``: the noise-level channels of ddgjax's PPGN."""
    if kind == "linear":
        return noise_level[:, None]
    if kind == "log":
        log_channel = 1.0 + torch.log10(torch.clamp(noise_level, min=LOG_FLOOR)) / 8.0
        return torch.stack([noise_level, log_channel], dim=-1)
    raise ValueError(f"noise_features: expected 'linear' or 'log', got {kind!r}")


def _bias(b: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # Under autocast a float32 bias would promote bfloat16 activations to float32.
    return b.to(y.dtype)


def _shared_weight(w: torch.Tensor, x: torch.Tensor, batch: int) -> torch.Tensor:
    """``w`` ``[D, C]`` expanded to ``[batch, D, C]`` (stride 0), cast first to ``x``'s
    dtype when ``x`` is already low precision (so autocast does not copy the expansion)."""
    if x.dtype in (torch.bfloat16, torch.float16):
        w = w.to(x.dtype)
    return w.expand(batch, -1, -1)


def dense_cf(lin: nn.Linear, x: torch.Tensor, bias: bool = True) -> torch.Tensor:
    """``nn.Linear`` over the channel axis of channels-first ``x [B, C, ...]`` -> ``[B, D, ...]``:
    one batched GEMM ``W @ x`` per graph (the weight shared, stride 0)."""
    b, c = x.shape[:2]
    y = torch.bmm(_shared_weight(lin.weight, x, b), x.reshape(b, c, -1))
    y = y.view(b, lin.out_features, *x.shape[2:])
    if bias:
        y = y + _bias(lin.bias, y).view(1, -1, *([1] * (x.dim() - 2)))
    return y


def dense_cl_to_cf(lin: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """Channels-last ``x [B, N, N, C]`` -> channels-first ``[B, D, N, N]`` = ``W @ x^T`` per
    graph (cuBLAS reads ``x`` transposed; nothing is copied)."""
    b, n1, n2, c = x.shape
    y = torch.bmm(_shared_weight(lin.weight, x, b), x.reshape(b, n1 * n2, c).mT)
    y = y + _bias(lin.bias, y)[None, :, None]
    return y.view(b, lin.out_features, n1, n2)


def dense_cf_to_cl(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Channels-first ``x [B, C, N, N]`` times ``w [D, C]`` -> channels-last ``[B, N, N, D]``
    (no bias): ``x^T @ w^T`` per graph, ``x`` read transposed."""
    b, c, n1, n2 = x.shape
    y = torch.bmm(x.reshape(b, c, n1 * n2).mT, _shared_weight(w.t(), x, b))
    return y.view(b, n1, n2, w.shape[0])


def masked_instance_norm(x: torch.Tensor, m: torch.Tensor, dims, eps: float = 1e-5):
    """Per graph and channel over the masked entries (``m`` float, broadcastable); no affine;
    statistics in float32; the output in ``x``'s dtype, zero off the mask."""
    xf = x.float()
    count = torch.clamp(m.sum(dim=dims, keepdim=True), min=1.0)
    mean = (xf * m).sum(dim=dims, keepdim=True) / count
    centred = (xf - mean) * m
    var = (centred * centred).sum(dim=dims, keepdim=True) / count
    return (centred * torch.rsqrt(var + eps)).to(x.dtype)


class PairMLP(nn.Module):
    def __init__(self, c_in: int, hidden: int):
        super().__init__()
        self.dense_0 = nn.Linear(c_in, hidden)
        self.dense_1 = nn.Linear(hidden, hidden)


class Block(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.m1 = PairMLP(hidden, hidden)
        self.m2 = PairMLP(hidden, hidden)
        self.mix = nn.Linear(2 * hidden, hidden)  # input order: concat[Y, P]


class TorchPPGN(nn.Module):
    """``forward(adj [B,N,N], node_mask bool[B,N], noise_level [B]) -> float32 logits [B,N,N]``.

    Parameter names follow ddgjax's tree (``embed``, ``block_k.{m1,m2}.dense_{0,1}``,
    ``block_k.mix``, ``readout``, ``residual``, ``out``); ``load_ddgjax_params`` copies
    a ddgjax PPGN's parameters in (flax kernels ``[in, out]`` become ``weight = kernel.T``).
    ``reset_parameters`` gives ddgjax's init (lecun-normal kernels, zero biases).
    """

    def __init__(self, hidden: int = 128, num_blocks: int = 8, noise_features: str = "linear",
                 layout: str = "cl", eps: float = 1e-5):
        super().__init__()
        if layout not in ("cl", "cf"):
            raise ValueError(f"layout: expected 'cl' or 'cf', got {layout!r}")
        self.hidden, self.num_blocks, self.layout, self.eps = hidden, num_blocks, layout, eps
        self.noise_features = noise_features
        c0 = 1 + (1 if noise_features == "linear" else 2)
        self.c0 = c0
        self.embed = nn.Linear(c0, hidden)
        self.blocks = nn.ModuleList([Block(hidden) for _ in range(num_blocks)])
        self.readout = nn.Linear(c0 + num_blocks * hidden, hidden)
        self.residual = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                # flax lecun_normal: truncated normal (+-2 std) with variance 1/fan_in
                std = 1.0 / math.sqrt(mod.in_features) / 0.87962566103423978
                nn.init.trunc_normal_(mod.weight, std=std, a=-2 * std, b=2 * std)
                nn.init.zeros_(mod.bias)

    def _readout_slices(self):
        """Column ranges of the readout weight: X_0 then each block's output."""
        h, c0 = self.hidden, self.c0
        return [(0, c0)] + [(c0 + k * h, c0 + (k + 1) * h) for k in range(self.num_blocks)]

    def forward(self, adj, node_mask, noise_level):
        bsz, n = adj.shape[:2]
        adj = adj.float()
        sq = (node_mask[:, :, None] & node_mask[:, None, :]).float()    # [B, N, N]
        inv_sqrt_n = torch.rsqrt(torch.clamp(node_mask.sum(-1).float(), min=1.0))  # [B]
        eye = torch.eye(n, device=adj.device, dtype=torch.float32)
        chans = noise_channels(noise_level.float(), self.noise_features)  # [B, C]
        wr = self.readout.weight
        sl = self._readout_slices()
        if self.layout == "cl":
            x0 = torch.cat([adj[..., None], chans[:, None, None, :] * eye[None, :, :, None]], -1)
            x0 = x0 * sq[..., None]                                     # [B, N, N, c0]
            x = self.embed(x0)
            z = F.linear(x0, wr[:, sl[0][0]:sl[0][1]], self.readout.bias)
            m_cf, m_cl = sq[:, None], sq[..., None]
            for k, blk in enumerate(self.blocks):
                a = dense_cl_to_cf(blk.m1.dense_1, leaky(blk.m1.dense_0(x)))  # [B, h, N, N]
                a = a * m_cf.to(a.dtype)
                b = dense_cl_to_cf(blk.m2.dense_1, leaky(blk.m2.dense_0(x)))
                h = a.shape[1]
                prod = torch.bmm(a.reshape(bsz * h, n, n), b.reshape(bsz * h, n, n))
                prod = prod.view(bsz, h, n, n)
                prod = prod * inv_sqrt_n.to(prod.dtype)[:, None, None, None]
                wm = blk.mix.weight
                y = F.linear(x, wm[:, :h], blk.mix.bias)
                y = y + dense_cf_to_cl(wm[:, h:], prod).to(y.dtype)
                x = masked_instance_norm(y, m_cl, (1, 2), self.eps)
                lo, hi = sl[k + 1]
                z = z + F.linear(x, wr[:, lo:hi]).to(z.dtype)
            z = z + leaky(self.residual(z))
            with torch.autocast(adj.device.type, enabled=False):
                logits = F.linear(z.float(), self.out.weight, self.out.bias)[..., 0]
        else:
            x0 = torch.cat([adj[:, None], chans[:, :, None, None] * eye[None, None]], 1)
            x0 = x0 * sq[:, None]                                       # [B, c0, N, N]
            x = dense_cf(self.embed, x0)
            z = dense_cf(_Slice(wr, *sl[0], self.readout.bias), x0)
            m_cf = sq[:, None]
            for k, blk in enumerate(self.blocks):
                a = dense_cf(blk.m1.dense_1, leaky(dense_cf(blk.m1.dense_0, x)))
                a = a * m_cf.to(a.dtype)
                b = dense_cf(blk.m2.dense_1, leaky(dense_cf(blk.m2.dense_0, x)))
                h = a.shape[1]
                prod = torch.matmul(a, b) * inv_sqrt_n.to(a.dtype)[:, None, None, None]
                wm = blk.mix.weight
                y = dense_cf(_Slice(wm, 0, h, blk.mix.bias), x)
                y = y + dense_cf(_Slice(wm, h, 2 * h), prod, bias=False).to(y.dtype)
                x = masked_instance_norm(y, m_cf, (2, 3), self.eps)
                lo, hi = sl[k + 1]
                z = z + dense_cf(_Slice(wr, lo, hi), x, bias=False).to(z.dtype)
            z = z + leaky(dense_cf(self.residual, z))
            with torch.autocast(adj.device.type, enabled=False):
                logits = dense_cf(self.out, z.float())[:, 0]
        logits = 0.5 * (logits + logits.transpose(1, 2))
        emask = sq.bool() & ~torch.eye(n, dtype=torch.bool, device=adj.device)[None]
        return torch.where(emask, logits, torch.zeros((), device=adj.device))


class _Slice:
    """A column range of a Dense weight (and optionally its bias) that ``dense_cf`` takes
    like an ``nn.Linear``: the partial product of a Dense over a concatenation."""

    def __init__(self, weight, lo, hi, bias=None):
        self.weight = weight[:, lo:hi]
        self.bias = bias
        self.out_features = weight.shape[0]


# ----------------------------------------------------------------------------
# Parameters from ddgjax


def _linear_names(num_blocks: int):
    names = ["embed", "readout", "residual", "out"]
    for k in range(num_blocks):
        for m in ("m1", "m2"):
            names += [f"block_{k}/{m}/dense_0", f"block_{k}/{m}/dense_1"]
        names.append(f"block_{k}/mix")
    return names


def load_ddgjax_params(model: TorchPPGN, flax_params) -> TorchPPGN:
    """Copy a ddgjax PPGN's parameters (``model.init``'s tree, with or without the outer
    ``{"params": ...}``) into ``model``; shapes must match exactly."""
    tree = flax_params.get("params", flax_params)
    mods = dict(model.named_modules())
    for name in _linear_names(model.num_blocks):
        node = tree
        for part in name.split("/"):
            node = node[part]
        torch_name = name.replace("/", ".").replace("block_", "blocks.")
        lin = mods[torch_name]
        kernel = torch.from_numpy(np.array(node["kernel"], np.float32)).t()
        bias = torch.from_numpy(np.array(node["bias"], np.float32))
        if tuple(kernel.shape) != tuple(lin.weight.shape) or bias.shape != lin.bias.shape:
            raise ValueError(f"{name}: ddgjax kernel {tuple(kernel.shape[::-1])} does not fit "
                             f"torch weight {tuple(lin.weight.shape)}")
        with torch.no_grad():
            lin.weight.copy_(kernel)
            lin.bias.copy_(bias)
    n_torch = sum(1 for m in model.modules() if isinstance(m, nn.Linear))
    if n_torch != len(_linear_names(model.num_blocks)):
        raise ValueError("torch model has Linear layers that ddgjax's tree does not name")
    return model


# ----------------------------------------------------------------------------
# Bit flips: Algorithm 2 and the L_simple loss (ddgjax.processes.bitflip)


def pair_mask(node_mask: torch.Tensor) -> torch.Tensor:
    """``bool[B, N]`` -> ``bool[B, N, N]``, real strict-upper pairs."""
    n = node_mask.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=node_mask.device).triu(1)
    return node_mask[:, :, None] & node_mask[:, None, :] & upper


def symmetric_upper_bernoulli(prob1, pm):
    upper = ((torch.rand_like(prob1) < prob1) & pm).float()
    return upper + upper.transpose(1, 2)


def flip_upper(adj, flip_prob, pm):
    """Flip each real upper entry with probability ``flip_prob [B]``; mirror."""
    a = torch.where(pm, adj, 0.0)
    flips = (torch.rand_like(adj) < flip_prob[:, None, None]) & pm
    upper = torch.where(flips, 1.0 - a, a) * pm
    return upper + upper.transpose(1, 2)


def sample_step(model, adj, node_mask, pm, bb_now, bb_prev, autocast_dtype=None):
    """One Algorithm-2 step (``bitflip.reverse_step``): ``A_0 ~ p(A_0 | A_t)`` on the upper
    triangle, symmetrised, then ``A_{t-1} ~ q(A_{t-1} | A_0)`` (flips with ``bb_prev``).
    ``bb_now``, ``bb_prev``: 0-d tensors (tensors, so ``torch.compile`` does not specialise
    on each level)."""
    bsz = adj.shape[0]
    noise = bb_now.expand(bsz)
    with torch.autocast(adj.device.type, dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        logits = model(adj, node_mask, noise)
    x0 = symmetric_upper_bernoulli(torch.sigmoid(logits.float()), pm)
    return flip_upper(x0, bb_prev.expand(bsz), pm)


def sample_graphs(step_fn, model, node_mask, beta_bar, autocast_dtype=None):
    """The K-step Algorithm-2 chain from ``A_T ~ ER(1/2)`` over the descending levels
    ``beta_bar [K+1]`` (a float32 tensor on the device); ``step_fn`` is ``sample_step``
    or a compiled copy."""
    pm = pair_mask(node_mask)
    adj = symmetric_upper_bernoulli(torch.full(pm.shape, 0.5, device=pm.device), pm)
    for k in range(beta_bar.shape[0] - 1):
        adj = step_fn(model, adj, node_mask, pm, beta_bar[k], beta_bar[k + 1], autocast_dtype)
    return adj


def simple_loss(model, adj0, node_mask, beta_bar_table, autocast_dtype=None):
    """L_simple (``bitflip.training_loss``, discrete time): per graph ``t ~ U{1..T}``,
    ``A_t = q_sample(A_0, bb_t)``, BCE of the logits against ``A_0`` weighted by
    ``1 - 2 bb_t + 1/T``, summed over real upper pairs, divided by their number."""
    bsz = adj0.shape[0]
    T = beta_bar_table.shape[0] - 1
    t = torch.randint(1, T + 1, (bsz,), device=adj0.device)
    bb = beta_bar_table[t]
    pm = pair_mask(node_mask)
    adj_t = flip_upper(adj0, bb, pm)
    with torch.autocast(adj0.device.type, dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        logits = model(adj_t, node_mask, bb)
    nll = F.binary_cross_entropy_with_logits(logits.float(), adj0, reduction="none")
    terms = nll * (1.0 - 2.0 * bb + 1.0 / T)[:, None, None]
    return torch.where(pm, terms, 0.0).sum() / torch.clamp(pm.sum(), min=1).float()


def train_step(loss_fn, model, opt, adj0, node_mask, beta_bar_table, autocast_dtype=None):
    """Forward + backward + Adam; ``loss_fn`` is ``simple_loss`` or a compiled copy."""
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model, adj0, node_mask, beta_bar_table, autocast_dtype)
    loss.backward()
    opt.step()
    return loss


def make_adam(model, lr=1e-3, b1=0.9, b2=0.999):
    """``torch.optim.Adam`` as optax.adam (eps 1e-8), fused on CUDA."""
    fused = next(model.parameters()).is_cuda
    return torch.optim.Adam(model.parameters(), lr=lr, betas=(b1, b2), eps=1e-8,
                            fused=fused or None)


# ----------------------------------------------------------------------------
# Same function as ddgjax


def random_batch(num_nodes, n_max: int, seed: int = 0, p: float = 0.3):
    """Random symmetric 0/1 graphs ``float32[B, N, N]`` padded to ``n_max`` (graph b has
    ``num_nodes[b]`` real nodes), their masks ``bool[B, N]`` and noise levels ``[B]`` in
    (0, 1/2]."""
    rng = np.random.default_rng(seed)
    num_nodes = np.asarray(num_nodes)
    mask = np.arange(n_max)[None, :] < num_nodes[:, None]
    pm = mask[:, :, None] & mask[:, None, :] & np.triu(np.ones((n_max, n_max), bool), 1)
    u = (rng.random((len(num_nodes), n_max, n_max)) < p) & pm
    adj = (u | u.transpose(0, 2, 1)).astype(np.float32)
    noise = rng.uniform(1e-3, 0.5, len(num_nodes)).astype(np.float32)
    return adj, mask, noise


def compare_with_ddgjax(hidden: int = 16, num_blocks: int = 3, noise_features: str = "linear",
                        layout: str = "cl", num_nodes=(9, 7, 4, 1, 9), n_max: int = 9,
                        seed: int = 0, device: str = "cpu", ddgjax_params=None,
                        grads: bool = True) -> dict:
    """Build a float32 ddgjax PPGN (random init, or ``ddgjax_params``; biases randomised
    either way), copy its parameters into a ``TorchPPGN`` and compare the logits on random padded graphs, and with ``grads``
    the parameter gradients of ``sum(logits * R)`` for a fixed random ``R``.

    Both sides run at full float32 matmul precision (JAX ``highest``, torch TF32 off).
    Returns ``rel_err`` = max abs logit difference / max abs logit (padding and diagonal
    entries, exactly 0 on both sides, are compared too) and ``grad_rel_err`` = the largest
    over the parameters of max abs gradient difference / max abs gradient of that
    parameter (floored at 1 % of the largest gradient of any parameter; the mix biases,
    whose gradient is 0 behind the instance norm, left out).
    """
    import jax
    import jax.numpy as jnp
    from ddgjax.models import build_model, init_params

    model = build_model("ppgn", 32, hidden=hidden, num_blocks=num_blocks,
                        noise_features=noise_features, compute_dtype=jnp.float32)
    params = ddgjax_params if ddgjax_params is not None else init_params(
        model, jax.random.key(seed), n_max)
    # Random biases (init has zeros): with zero biases many pre-activations are exactly 0
    # (non-edges embed to 0), where leaky_relu's derivative is a convention (JAX 1, torch
    # 0.01), and the gradients would differ there for that reason alone.
    rng = np.random.default_rng(seed + 2)
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: (x + 0.1 * rng.standard_normal(x.shape).astype(np.float32)
                         if getattr(path[-1], "key", None) == "bias" else x), params)
    adj, mask, noise = random_batch(num_nodes, n_max, seed)
    weights = np.random.default_rng(seed + 1).normal(size=adj.shape).astype(np.float32)
    t_idx = jnp.ones(len(adj), jnp.int32)
    with jax.default_matmul_precision("highest"):
        ref = np.asarray(jax.jit(model.apply)(params, adj, mask, t_idx, noise))
        if grads:
            ref_grads = jax.jit(jax.grad(
                lambda p: jnp.sum(model.apply(p, adj, mask, t_idx, noise) * weights)))(params)
    tmodel = TorchPPGN(hidden, num_blocks, noise_features, layout).to(device)
    load_ddgjax_params(tmodel, params)
    prev = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        out_t = tmodel(torch.from_numpy(adj).to(device), torch.from_numpy(mask).to(device),
                       torch.from_numpy(noise).to(device))
        if grads:
            (out_t * torch.from_numpy(weights).to(device)).sum().backward()
        out = out_t.detach().cpu().numpy()
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = prev
    err = float(np.max(np.abs(out - ref)))
    scale = float(np.max(np.abs(ref)))
    result = {"max_abs_err": err, "max_abs_ref": scale, "rel_err": err / max(scale, 1e-30),
              "layout": layout, "noise_features": noise_features, "hidden": hidden,
              "num_blocks": num_blocks, "num_nodes": [int(n) for n in num_nodes],
              "n_max": n_max}
    if grads:
        mods = dict(tmodel.named_modules())
        tree = ref_grads.get("params", ref_grads)
        pairs = []
        for name in _linear_names(num_blocks):
            node = tree
            for part in name.split("/"):
                node = node[part]
            lin = mods[name.replace("/", ".").replace("block_", "blocks.")]
            pairs += [(name + "/kernel", np.asarray(node["kernel"]).T, lin.weight.grad),
                      (name + "/bias", np.asarray(node["bias"]), lin.bias.grad)]
        # The mix biases feed an instance norm, which removes them: their true gradient is
        # 0 and both sides return rounding noise, so they are left out; a floor on each
        # parameter's scale keeps other near-zero gradients from dividing noise by noise.
        pairs = [p for p in pairs if not p[0].endswith("mix/bias")]
        floor = 1e-2 * max(float(np.max(np.abs(g))) for _, g, _ in pairs)
        worst, worst_name = 0.0, None
        for name, ref_g, got in pairs:
            got = got.detach().cpu().numpy()
            rel = float(np.max(np.abs(got - ref_g)) / max(np.max(np.abs(ref_g)), floor))
            if rel >= worst:
                worst, worst_name = rel, name
        result.update(grad_rel_err=worst, grad_worst_param=worst_name)
    return result
