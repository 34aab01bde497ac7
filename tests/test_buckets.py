"""Size buckets (config.data.buckets): the plan, the epoch schedule, training, resuming,
sampling in buckets; and the large-N path (rematerialisation equals none at N = 64)."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import test as test_config
from ddgjax import buckets, input_pipeline, sampling, training
from ddgjax.buckets import parse_buckets
from ddgjax.configuration import get_config, validate_config
from ddgjax.data import NodeCountDistribution, node_count_distribution
from ddgjax.graphs import GraphBatch, node_mask_from_counts
from ddgjax.models import model_from_config
from ddgjax.parallel import batch_sharded, make_mesh, put_global, replicate
from ddgjax.processes import process_from_config

from helpers import random_batch

ONE = jax.devices()[:1]


def dist(counts):
    c, f = np.unique(np.asarray(counts), return_counts=True)
    return NodeCountDistribution(c, f / f.sum())


# ----------------------------------------------------------------------------
# The plan


def test_parse_and_bounds():
    assert parse_buckets("") == 0 and parse_buckets("0") == 0 and parse_buckets(None) == 0
    assert parse_buckets("3") == 3 and parse_buckets(3) == 3
    assert parse_buckets("96, 64,128") == (64, 96, 128) == parse_buckets((128, 96, 64))
    assert parse_buckets("128,") == (128,)
    for bad in ("x", "-2", "64,0", "1.5", 2.5):
        with pytest.raises(ValueError, match="config.data.buckets"):
            parse_buckets(bad)
    cfg = test_config.get_config()
    cfg.data.buckets = "64,abc"
    with pytest.raises(ValueError, match="config.data.buckets"):
        validate_config(cfg)

    counts = [10] * 4 + [12] * 4 + [15] * 4 + [20] * 4  # 16 graphs
    d = dist(counts)
    assert buckets.bucket_bounds("", d, 20) == ()
    # quartiles: the smallest count with >= k/4 of the graphs at or below it
    assert buckets.bucket_bounds("4", d, 20) == (10, 12, 15, 20)
    assert buckets.bucket_bounds("2", d, 20) == (12, 20)
    assert buckets.bucket_bounds("2", d, 24) == (12, 20, 24)  # max_nodes always last
    assert buckets.bucket_bounds("8", d, 20) == (10, 12, 15, 20)  # repeated sizes merge
    assert buckets.bucket_bounds("11,30", d, 20) == (11, 20)  # clipped, max_nodes added
    # what a run records (JSON round trip) finds the same sizes
    back = NodeCountDistribution.from_dict(json.loads(json.dumps(d.to_dict())))
    assert buckets.bucket_bounds("4", back, 20) == (10, 12, 15, 20)
    cfg.data.buckets = "4"                        # a run's sizes: its config's buckets
    assert buckets.run_bucket_sizes(cfg, back, 20) == (10, 12, 15, 20)
    np.testing.assert_array_equal(buckets.assign_buckets([10, 11, 12, 13, 20], (10, 12, 20)),
                                  [0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="larger than the largest bucket"):
        buckets.assign_buckets([21], (10, 20))


def test_sampling_groups_by_bucket_with_power_of_two_batches():
    """A sampling request in buckets: one group per bucket holding requested graphs, its
    batch the bucket's cap or less, the group's size rounded up to a power of two (and to
    the devices); without buckets one group at max_nodes."""
    counts = np.array([18, 12, 20, 15, 16, 11, 19])
    plain = buckets.sampling_groups(counts, 20, (), 16, 4)
    assert [(n, i.tolist(), b) for n, i, b in plain] == [(20, list(range(7)), 8)]
    groups = buckets.sampling_groups(counts, 20, (15, 20), 16, 1)
    assert [(n, i.tolist(), b) for n, i, b in groups] == [(15, [1, 3, 5], 4),
                                                         (20, [0, 2, 4, 6], 4)]
    assert buckets.sampling_groups(counts, 20, (15, 20), 2, 1)[0][2] == 3  # the cap: 2 * 16/9


def test_batch_rule_and_loss_weights():
    # 40 graphs of 10 nodes, 30 of 20, 5 of 39, 9 of 40 (max_nodes 40), B = 8
    n = np.array([10] * 40 + [20] * 30 + [39] * 5 + [40] * 9)
    plan = buckets.plan_buckets(n, (10, 20, 40), 8, 40)
    assert plan.sizes == (10, 20, 40)
    assert [len(m) for m in plan.members] == [40, 30, 14]
    # caps floor(8 * (40/N)^2) = 128, 32, 8; graphs spread evenly over ceil(G/cap) steps
    assert buckets.bucket_batch_cap(8, 40, 10) == 128
    assert plan.batch_sizes == (40, 30, 7) and plan.steps == (1, 1, 2)
    assert plan.steps_per_epoch == 4
    for size, bsz in zip(plan.sizes, plan.batch_sizes):  # padded pairs per step <= B N_max^2
        assert bsz * size ** 2 <= 8 * 40 ** 2
    pairs = n * (n - 1) / 2
    total = pairs.sum()
    for m, w, s in zip(plan.members, plan.weights, plan.steps):
        # a bucket's share of the epoch's weighted steps is its share of the pairs
        np.testing.assert_allclose(w * s / plan.steps_per_epoch, pairs[m].sum() / total)
    # several devices: batches rounded up to a multiple of them
    plan4 = buckets.plan_buckets(n, (10, 20, 40), 8, 40, num_devices=4)
    assert plan4.batch_sizes == (40, 32, 8) and plan4.steps == (1, 1, 2)
    # one bucket at max_nodes: the plain batch (balanced), weight 1
    one = buckets.plan_buckets(n, (40,), 8, 40)
    assert one.batch_sizes == (8,) and one.steps == (11,) and one.weights == (1.0,)
    # max_batch caps the small buckets' batches (more steps), the weights still share pairs
    capped = buckets.plan_buckets(n, (10, 20, 40), 8, 40, max_batch=16)
    assert capped.batch_sizes == (14, 15, 7) and capped.steps == (3, 2, 2)
    for m, w, s in zip(capped.members, capped.weights, capped.steps):
        np.testing.assert_allclose(w * s / capped.steps_per_epoch, pairs[m].sum() / total)


def test_an_epoch_visits_every_graph_once():
    n = np.random.default_rng(0).integers(3, 41, size=57)
    plan = buckets.plan_buckets(n, (12, 25, 40), 4, 40)
    order, batches, weights = buckets.bucket_epoch_batches(plan, seed=1, epoch=3)
    assert len(order) == len(batches) == len(weights) == plan.steps_per_epoch
    seen = []
    for b, idx in zip(order, batches):
        assert idx.shape == (plan.batch_sizes[b],) and idx.dtype == np.int32
        members = plan.members[b]
        real = idx[idx < len(members)]
        assert np.all(idx[len(real):] == len(members))  # padding (the empty graph) last
        seen.extend(members[real].tolist())
        assert np.all(n[members[real]] <= plan.sizes[b])
        assert weights[b == order][0] == np.float32(plan.weights[b])
    assert sorted(seen) == list(range(len(n)))
    assert sorted(order.tolist()) == sorted(np.repeat(np.arange(3), plan.steps).tolist())
    # the order depends on (seed, epoch) only
    again = buckets.bucket_epoch_batches(plan, seed=1, epoch=3)
    np.testing.assert_array_equal(order, again[0])
    assert all(np.array_equal(a, b) for a, b in zip(batches, again[1]))
    other = buckets.bucket_epoch_batches(plan, seed=1, epoch=4)
    assert not (np.array_equal(order, other[0])
                and all(np.array_equal(a, b) for a, b in zip(batches, other[1])))
    # the interleaving the published runs trained with (pinned by its formula)
    rng = np.random.default_rng([1, 3, 3])
    for m in plan.members:
        rng.permutation(m.size)
    np.testing.assert_array_equal(order, rng.permutation(np.repeat(np.arange(3), plan.steps)))
    two = buckets.bucket_batches_for_epochs(plan, 1, 3, 5)
    assert len(two[0]) == 2 * plan.steps_per_epoch
    np.testing.assert_array_equal(two[0][:len(order)], order)
    # the bucket arrays: each bucket's graphs cut to its size, the empty graph appended
    adj, mask = random_batch(0, n, 40)
    data = buckets.bucket_data(GraphBatch(adj, mask), plan)
    for d, size, m in zip(data, plan.sizes, plan.members):
        assert d.adj.shape == (len(m) + 1, size, size) and not d.node_mask[-1].any()
        np.testing.assert_array_equal(d.adj[:-1], adj[m][:, :size, :size])
        assert not adj[m][:, size:].any()


def test_step_weight_scales_the_gradient_not_the_loss():
    cfg = test_config.get_config()
    model, process = model_from_config(cfg), process_from_config(cfg)
    tx = optax.sgd(0.1)
    mesh = make_mesh(ONE)
    adj, mask = random_batch(2, [5, 7, 8, 6], 8)
    data = replicate(input_pipeline.device_copy(GraphBatch(adj, mask)), mesh)
    state = replicate(training.init_state(model, tx, jax.random.key(0), 8), mesh)
    idx = put_global(np.array([[0, 1, 2, 4]], np.int32), batch_sharded(mesh, 1))
    weighted = training.make_train_chunk(model, tx, process, mesh, jax.random.key(3),
                                         weighted=True)
    outs = {w: weighted(state, data, idx, jnp.array([w], jnp.float32))
            for w in (1.0, 2.5)}
    np.testing.assert_allclose(outs[2.5][1], outs[1.0][1], rtol=1e-6)  # the loss is unweighted
    p0 = jax.tree_util.tree_leaves(state.params)
    for a, b, ref in zip(jax.tree_util.tree_leaves(outs[1.0][0].params),
                         jax.tree_util.tree_leaves(outs[2.5][0].params), p0):
        np.testing.assert_allclose(np.asarray(b) - ref, 2.5 * (np.asarray(a) - ref),
                                   rtol=1e-4, atol=1e-7)


# ----------------------------------------------------------------------------
# Training and sampling with buckets


def bucket_config():
    cfg = test_config.get_config()
    cfg.data.buckets = "15,"        # buckets 15 and 20 (max_nodes) on Community-small
    cfg.train.num_epochs = 2
    cfg.train.checkpoint_every_epochs = 1
    return cfg


@pytest.fixture(scope="module")
def bucket_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("buckets")
    straight = training.train(bucket_config(), str(root / "a"), verbose=False, devices=ONE)
    return root, straight


def _losses(workdir):
    return [r for r in map(json.loads, open(workdir / "metrics.jsonl")) if "loss" in r]


def test_training_in_buckets_checkpoints_and_resumes(bucket_run):
    from ddgjax import checkpoints

    root, straight = bucket_run
    plan = straight["buckets"]
    assert [b["nodes"] for b in plan] == [15, 20] and sum(b["graphs"] for b in plan) == 80
    spe = straight["steps_per_epoch"]
    assert spe == sum(b["steps"] for b in plan) and straight["steps"] == 2 * spe
    assert [(r["epoch"], r["step"]) for r in _losses(root / "a")] == [(1, spe), (2, 2 * spe)]
    first = training.train(bucket_config(), str(root / "b"), stop_after_epochs=1,
                           verbose=False, devices=ONE)
    assert first["epochs"] == 1 and checkpoints.restore_meta(str(root / "b"), "latest")["epoch"] == 1
    second = training.train(bucket_config(), str(root / "b"), verbose=False, devices=ONE)
    assert second["epochs"] == 2 and second["steps"] == straight["steps"]
    a = sampling.load_run(str(root / "a"), "latest").params
    b = sampling.load_run(str(root / "b"), "latest").params
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), a, b)
    assert [r["loss"] for r in _losses(root / "a")] == [r["loss"] for r in _losses(root / "b")]
    assert all(np.isfinite(r["loss"]) for r in _losses(root / "a"))
    # other buckets are another run; several seeds in one program refuse buckets
    other = bucket_config()
    other.data.buckets = "2"
    with pytest.raises(Exception, match="data.buckets"):
        training.train(other, str(root / "b"), verbose=False, devices=ONE)
    with pytest.raises(training.TrainingError, match="config.data.buckets: several seeds"):
        training.train_seeds(bucket_config(), str(root / "s"), [0, 1], verbose=False,
                             devices=ONE)
    _check_sampling_in_buckets(root / "a")


def _check_sampling_in_buckets(workdir):
    """(Part of the test above, to train once on a machine that runs tests in parallel.)
    Sampling in buckets: graphs in request order with their node counts, independent of
    the batch size, each the sampler's draw with its own key at its bucket's size."""
    run = sampling.load_run(str(workdir))
    assert sampling.sampling_buckets(run) == (15, 20)
    counts = np.array([18, 12, 20, 15, 16, 11, 19, 14, 13])  # mixed buckets, mixed order
    kw = dict(seed=3, num_steps=3, node_counts=counts)
    a = sampling.generate(run, len(counts), batch_size=2, **kw)
    b = sampling.generate(run, len(counts), batch_size=16, **kw)
    assert a["buckets"] == [15, 20]
    np.testing.assert_array_equal(a["adj"], b["adj"])
    np.testing.assert_array_equal(a["num_nodes"], counts)
    assert a["adj"].shape == (9, 20, 20)
    for adj, n, g in zip(a["adj"], counts, a["graphs"]):
        assert g.number_of_nodes() == n and not adj[n:].any() and not adj[:, n:].any()
        np.testing.assert_array_equal(adj, adj.T)
    # graph i is the sampler's draw with key i at its bucket's size (batches of shapes
    # generate compiled: 3 x 15 and 2 x 20 at batch_size=2)
    fn = sampling.compiled_sampler(run.model, run.process.sampler(3, False))
    for size, picks in ((15, [5, 1, 3]), (20, [6, 0])):
        out = fn(run.params, sampling.graph_keys_at(3, picks),
                 node_mask_from_counts(counts[picks], size))
        np.testing.assert_array_equal(np.asarray(out, np.uint8), a["adj"][picks, :size, :size])
    # several seeds in one request: each seed's graphs as generate draws them, though
    # the seeds share each bucket's batches
    seeds = [1, 2, 5, 6]
    merged = sampling.generate_seeds(run, 4, seeds, batch_size=16, num_steps=3)
    for seed, got in zip(seeds, merged):
        want = sampling.generate(run, 4, seed=seed, batch_size=16, num_steps=3)
        np.testing.assert_array_equal(got["num_nodes"], want["num_nodes"])
        np.testing.assert_array_equal(got["adj"], want["adj"])
        assert got["buckets"] == want["buckets"] == [15, 20]
    plain = sampling.generate(run, len(counts), batch_size=4, buckets=False, **kw)  # 4 x 20
    assert "buckets" not in plain and plain["adj"].shape == (9, 20, 20)
    # another draw of node counts (another seed) reuses the shapes of the first: a bucket's
    # batch is its group size rounded up to a power of two (9 and then 13 graphs of <= 15
    # nodes: 16 both times, where rounding to the 4 test devices alone gives 12, then 16)
    pool = list(range(11, 16)) * 3                     # node counts of the 15-node bucket
    for k, compiled in ((9, True), (13, False)):
        draw = np.array(pool[:k] + [20], np.int32)
        out = sampling.generate(run, len(draw), batch_size=16, seed=k, num_steps=3,
                                node_counts=draw)
        assert (out["compile_seconds"] > 0) == compiled, (k, out["compile_seconds"])


# ----------------------------------------------------------------------------
# The large-N path: rematerialisation per block changes memory, not the result


def test_remat_equals_no_remat_at_64_nodes():
    cfg = test_config.get_config()
    counts = [64, 60, 50, 64]
    adj, mask = random_batch(1, counts, 64, p=0.1)
    mesh = make_mesh(ONE)
    data = replicate(input_pipeline.device_copy(GraphBatch(adj, mask)), mesh)
    idx = put_global(np.array([[0, 1, 2, 3], [3, 2, 1, 0]], np.int32), batch_sharded(mesh, 1))
    out = {}
    for remat in (False, True):
        cfg.model.ppgn.remat = remat
        model, process = model_from_config(cfg), process_from_config(cfg)
        tx = optax.sgd(0.05)  # (Adam's first steps, about lr * sign(g), amplify rounding)
        state = replicate(training.init_state(model, tx, jax.random.key(0), 64), mesh)
        chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(5))
        out[remat] = chunk(state, data, idx)
    (s0, l0), (s1, l1) = out[False], out[True]
    assert np.all(np.isfinite(l0)) and int(s1.step) == 2
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    moved = 0.0
    for a, b, ref in zip(jax.tree_util.tree_leaves(s0.params), jax.tree_util.tree_leaves(s1.params),
                         jax.tree_util.tree_leaves(state.params)):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
        moved = max(moved, float(np.abs(np.asarray(a) - np.asarray(ref)).max()))
    assert moved > 1e-3  # the steps did change the parameters


# ----------------------------------------------------------------------------
# The SPECTRE configs


@pytest.mark.parametrize("name", ["spectre_sbm", "spectre_comm20"])
def test_spectre_configs_load_and_plan(name):
    from ddgjax.data import load_dataset

    cfg = get_config(name)
    validate_config(cfg)
    assert (cfg.model.ppgn.num_blocks, cfg.model.ppgn.hidden) == (8, 128)
    assert cfg.model.compute_dtype == "bfloat16"
    assert cfg.diffusion.prior == "marginal" and cfg.model.ppgn.noise_features == "log"
    ds = load_dataset(cfg.data.source)
    if name == "spectre_sbm":
        assert (len(ds.train), len(ds.val), len(ds.test)) == (128, 32, 40)
        assert (cfg.validation.validity, cfg.validation.metric) == ("sbm", "valid")
        bounds = buckets.bucket_bounds(cfg.data.buckets, node_count_distribution(ds.train),
                                              187)
        assert bounds == (64, 96, 128, 187)
        n = [g.number_of_nodes() for g in ds.train]
        plan = buckets.plan_buckets(n, bounds, cfg.train.batch_size, 187)
        assert sum(len(m) for m in plan.members) == 128
        assert all(b * s * s <= 32 * 187 ** 2 for b, s in zip(plan.batch_sizes, plan.sizes))
        # the PPGN runs the 187-node bucket on 192 nodes, the others as they are
        from ddgjax.models.ppgn import padded_nodes
        assert [padded_nodes(n, cfg.model.ppgn.pad_multiple) for n in bounds] == [
            64, 96, 128, 192]
    else:
        assert (len(ds.train), len(ds.val), len(ds.test)) == (64, 16, 20)
        assert cfg.data.buckets == "" and cfg.validation.metric == "mmd"


def test_spectre_comm20_trains_an_epoch_on_a_tiny_override(tmp_path):
    cfg = get_config("spectre_comm20")
    cfg.model.ppgn.hidden, cfg.model.ppgn.num_blocks = 8, 2
    cfg.model.compute_dtype = "float32"
    cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 1, 1
    cfg.validation.every_epochs = 0
    out = training.train(cfg, str(tmp_path / "c"), verbose=False, devices=ONE)
    assert out["epochs"] == 1 and out["steps"] == 2  # 64 graphs, batch 32
