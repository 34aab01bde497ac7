"""Checkpoints: save/restore round trip, parameter-only restore, shape checks, atomicity."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ddgjax import checkpoints, training
from ddgjax.models import abstract_params, build_model

T = 8


def state_of(hidden, seed=0):
    model = build_model("ppgn", T, hidden=hidden, num_blocks=2)
    tx = optax.adam(1e-3)
    state = training.init_state(model, tx, jax.random.key(seed), 6)
    # make params and ema_params differ, so a restore that swaps them is caught
    state = state.replace(ema_params=jax.tree_util.tree_map(lambda x: x + 1.0, state.params),
                          step=jnp.asarray(7, jnp.int32))
    return model, tx, state


def assert_trees_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    wd = str(tmp_path_factory.mktemp("ckpt"))
    model, tx, state = state_of(hidden=8)
    checkpoints.save(wd, "latest", 7, state, {"epoch": 3, "step": 7, "loss": 0.5})
    return wd, model, tx, state


def test_full_restore_round_trip(saved):
    wd, model, tx, state = saved
    target = training.init_state(model, tx, jax.random.key(99), 6)
    restored, meta = checkpoints.restore(wd, "latest", target)
    assert meta == {"epoch": 3, "step": 7, "loss": 0.5}
    assert_trees_equal(restored, state)
    assert checkpoints.latest_step(wd, "latest") == 7
    assert checkpoints.restore_meta(wd, "latest")["epoch"] == 3


def test_params_restore_needs_no_optimizer(saved):
    wd, model, _, state = saved
    params, ema, meta = checkpoints.restore_params(wd, "latest", abstract_params(model))
    assert meta["step"] == 7
    assert_trees_equal(params, state.params)
    assert_trees_equal(ema, state.ema_params)
    assert (jax.tree_util.tree_structure(params)
            == jax.tree_util.tree_structure(abstract_params(model)))


def test_a_checkpoint_of_another_model_size_is_refused(saved):
    wd, _, _, _ = saved
    other_model, other_tx, _ = state_of(hidden=12)
    target = training.init_state(other_model, other_tx, jax.random.key(0), 6)
    with pytest.raises(checkpoints.CheckpointError, match="does not fit this config.*shape"):
        checkpoints.restore(wd, "latest", target)
    with pytest.raises(checkpoints.CheckpointError, match="does not fit this config"):
        checkpoints.restore_params(wd, "latest", abstract_params(other_model))
    deeper = build_model("ppgn", T, hidden=8, num_blocks=3)
    with pytest.raises(checkpoints.CheckpointError, match="tree differs at params.*block_2"):
        checkpoints.restore_params(wd, "latest", abstract_params(deeper))
    with pytest.raises(checkpoints.CheckpointError,
                       match=r"params\['params'\]\['block_0'\].* has shape \(8,?"):
        checkpoints.restore(wd, "latest", target)


def test_a_state_is_stored_packed_and_checkpoints_of_the_old_layout_still_restore(tmp_path):
    """New saves store each top-level field as one array per dtype plus a JSON layout (a
    few arrays instead of one per leaf); a checkpoint written leaf by leaf, as before
    the packed layout, restores in full and parameters-only the same way."""
    import orbax.checkpoint as ocp
    model, tx, state = state_of(hidden=8)
    host = jax.tree_util.tree_map(np.asarray, state)
    packed, layout = checkpoints.pack_state(host)
    assert sorted(packed) == ["ema_params", "opt_state", "params", "step"]
    assert sum(len(v) for v in packed.values()) <= 6 < len(jax.tree_util.tree_leaves(state))
    assert layout["fields"]["params"][0][0][:2] == ["params", "block_0"]
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    checkpoints.save(new, "latest", 7, state, {"epoch": 3})
    assert os.path.isdir(os.path.join(checkpoints.checkpoint_dir(new, "latest", 7), "layout"))
    with checkpoints._manager(old, "latest") as mngr:      # the layout before packing
        mngr.save(7, args=ocp.args.Composite(state=ocp.args.StandardSave(host),
                                             meta=ocp.args.JsonSave({"epoch": 3})))
        mngr.wait_until_finished()
    target = training.init_state(model, tx, jax.random.key(99), 6)
    for wd in (new, old):
        restored, meta = checkpoints.restore(wd, "latest", target)
        assert meta == {"epoch": 3}
        assert_trees_equal(restored, state)
        assert (jax.tree_util.tree_structure(restored)
                == jax.tree_util.tree_structure(target))
        params, ema, _ = checkpoints.restore_params(wd, "latest", abstract_params(model))
        assert_trees_equal(params, state.params)
        assert_trees_equal(ema, state.ema_params)


def test_a_packed_checkpoint_with_a_broken_layout_is_unreadable(tmp_path):
    """A layout of another format, or packed arrays that do not match their layout, is
    refused by name instead of being cut into wrong parameters."""
    wd = str(tmp_path)
    model, _, state = state_of(hidden=8)
    host = jax.tree_util.tree_map(np.asarray, state)
    packed, layout = checkpoints.pack_state(host)
    short = {k: v[:-1] for k, v in packed["params"].items()}
    with pytest.raises(ValueError, match="do not match its layout"):
        checkpoints.unpack_field(short, layout, "params", abstract_params(model), "here")
    checkpoints.save(wd, "latest", 7, state, {})
    layout_file = os.path.join(checkpoints.checkpoint_dir(wd, "latest", 7), "layout", "metadata")
    with open(layout_file, "w") as f:      # a format this version does not know
        f.write('{"format": "something-else", "fields": {}}')
    with pytest.raises(checkpoints.CheckpointError, match="layout 'something-else'") as err:
        checkpoints.restore_params(wd, "latest", abstract_params(model))
    assert not isinstance(err.value, checkpoints.UnreadableCheckpointError)
    with open(layout_file, "w") as f:      # our format, but no layout for its fields
        f.write('{"format": "%s", "fields": {"params": 3}}' % checkpoints.LAYOUT_FORMAT)
    with pytest.raises(checkpoints.UnreadableCheckpointError, match="layout"):
        checkpoints.restore_params(wd, "latest", abstract_params(model))


def test_an_optimizer_state_of_another_structure_is_refused(tmp_path, monkeypatch):
    """Adam's and AdamW's states have the same leaves but not the same structure: the
    layout's node counts refuse the swap. A state that cannot be packed raises before
    the save touches the checkpoint already on disk."""
    wd = str(tmp_path)
    model, _, state = state_of(hidden=8)
    checkpoints.save(wd, "latest", 7, state, {"epoch": 1})
    adamw = optax.adamw(1e-3)
    target = training.init_state(model, adamw, jax.random.key(0), 6)
    with pytest.raises(checkpoints.CheckpointError, match="opt_state tree has another structure"):
        checkpoints.restore(wd, "latest", target)

    def broken(state):
        raise TypeError("cannot pack")

    monkeypatch.setattr(checkpoints, "pack_state", broken)
    with pytest.raises(TypeError, match="cannot pack"):
        checkpoints.save(wd, "latest", 7, state, {"epoch": 2})
    assert checkpoints.restore_meta(wd, "latest") == {"epoch": 1}


def test_missing_checkpoint_names_the_workdir(tmp_path):
    _, _, state = state_of(hidden=8)
    with pytest.raises(checkpoints.CheckpointError, match=f"{tmp_path}: no 'best' checkpoint"):
        checkpoints.restore(str(tmp_path), "best", state)
    assert checkpoints.latest_step(str(tmp_path), "best") is None
    with pytest.raises(ValueError, match="unknown checkpoint kind"):
        checkpoints.save(str(tmp_path), "newest", 1, state, {})


def test_saving_a_step_again_keeps_the_one_on_disk(tmp_path, monkeypatch):
    """After a kill between the `best` and `latest` saves, the resumed run saves the
    same step again: the complete checkpoint on disk stays (it is never deleted to be
    rewritten, which would leave the kind without one until the write finished); the
    next step replaces it and the manager keeps exactly one."""
    wd = str(tmp_path)
    model, tx, state = state_of(hidden=8)
    checkpoints.save(wd, "latest", 5, state, {"epoch": 1})
    later = state.replace(params=jax.tree_util.tree_map(lambda x: x * 2.0, state.params))
    deleted = []
    real_delete = checkpoints.ocp.CheckpointManager.delete
    monkeypatch.setattr(checkpoints.ocp.CheckpointManager, "delete",
                        lambda self, step: deleted.append(step) or real_delete(self, step))
    checkpoints.save(wd, "latest", 5, later, {"epoch": 2})
    assert deleted == [] and checkpoints.restore_meta(wd, "latest") == {"epoch": 1}
    params, _, _ = checkpoints.restore_params(wd, "latest", abstract_params(model))
    assert_trees_equal(params, state.params)
    checkpoints.save(wd, "latest", 9, later, {"epoch": 3})
    assert sorted(os.listdir(os.path.join(wd, "checkpoints", "latest"))) == ["9"]
    params, _, meta = checkpoints.restore_params(wd, "latest", abstract_params(model))
    assert meta["epoch"] == 3
    assert_trees_equal(params, later.params)


# ----------------------------------------------------------------------------
# CheckpointWriter: asynchronous saves of a training run


@pytest.fixture
def held_commit(monkeypatch):
    """Hold every asynchronous write just before its final rename (Orbax's commit
    callback, run by its background thread) until ``release`` is set; ``reached`` is
    set once a write got there. ``action`` (optional) replaces the rename."""
    import threading

    from orbax.checkpoint._src.checkpointers import async_checkpointer

    real = async_checkpointer._on_commit_callback
    hold = {"reached": threading.Event(), "release": threading.Event(), "action": None}

    def commit(*args, **kwargs):
        hold["reached"].set()
        assert hold["release"].wait(60), "the test never released the write"
        return (hold["action"] or real)(*args, **kwargs)

    monkeypatch.setattr(async_checkpointer, "_on_commit_callback", commit)
    yield hold
    hold["release"].set()  # never leave a background write waiting


def test_writer_round_trip_and_a_writable_state_may_change_after_save(tmp_path):
    wd = str(tmp_path)
    model, tx, state = state_of(hidden=8)
    mine = jax.tree_util.tree_map(np.array, state)  # writable host arrays
    with checkpoints.CheckpointWriter(wd) as writer:
        writer.save("best", 7, mine, {"epoch": 3, "step": 7, "loss": 0.5})
        writer.save("latest", 7, mine, {"epoch": 3, "step": 7, "loss": 0.5})
        for leaf in jax.tree_util.tree_leaves(mine):  # the writer keeps its own copy
            leaf[...] = -1
        writer.wait()
    for kind in ("best", "latest"):
        restored, meta = checkpoints.restore(wd, kind, training.init_state(
            model, tx, jax.random.key(99), 6))
        assert meta == {"epoch": 3, "step": 7, "loss": 0.5}
        assert_trees_equal(restored, state)
    with pytest.raises(checkpoints.CheckpointError, match="after close"):
        writer.save("latest", 9, state, {})


def test_the_previous_checkpoint_stays_until_the_new_one_is_final(tmp_path, held_commit):
    """max_to_keep=1: while the new write is in flight (here: held before its rename), the
    old step is on disk, complete and the one readers see; after wait(), only the new."""
    wd = str(tmp_path)
    model, _, state = state_of(hidden=8)
    later = state.replace(params=jax.tree_util.tree_map(lambda x: x * 2.0, state.params))
    with checkpoints.CheckpointWriter(wd) as writer:
        held_commit["release"].set()
        writer.save("latest", 5, state, {"epoch": 1})
        writer.wait()
        held_commit["release"].clear()
        writer.save("latest", 9, later, {"epoch": 2})  # returns while the write is held
        assert held_commit["reached"].wait(60)
        assert checkpoints.latest_step(wd, "latest") == 5
        params, _, meta = checkpoints.restore_params(wd, "latest", abstract_params(model))
        assert meta == {"epoch": 1}
        assert_trees_equal(params, state.params)
        names = os.listdir(os.path.join(wd, "checkpoints", "latest"))
        assert "5" in names and "9" not in names and any("tmp" in n for n in names)
        held_commit["release"].set()
        writer.wait()
        assert sorted(os.listdir(os.path.join(wd, "checkpoints", "latest"))) == ["9"]
    params, _, meta = checkpoints.restore_params(wd, "latest", abstract_params(model))
    assert meta == {"epoch": 2}
    assert_trees_equal(params, later.params)


def test_a_failed_write_raises_on_wait_and_keeps_the_previous_checkpoint(tmp_path, held_commit,
                                                                         capsys):
    wd = str(tmp_path)
    model, _, state = state_of(hidden=8)
    writer = checkpoints.CheckpointWriter(wd)
    held_commit["release"].set()
    writer.save("latest", 5, state, {"epoch": 1})
    writer.wait()

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    held_commit["action"] = disk_full
    writer.save("latest", 9, state, {"epoch": 2})
    with pytest.raises(OSError, match="No space left"):
        writer.wait()
    writer.close()
    assert checkpoints.latest_step(wd, "latest") == 5
    assert checkpoints.restore_meta(wd, "latest") == {"epoch": 1}
    # while another error ends the run, a failed write is reported, not raised
    other = checkpoints.CheckpointWriter(wd)
    other.save("latest", 11, state, {"epoch": 3})
    other.close_after_error()
    assert "a checkpoint write failed (OSError: No space left" in capsys.readouterr().err
    assert checkpoints.restore_meta(wd, "latest") == {"epoch": 1}


def test_a_new_writer_goes_on_from_a_closed_one(tmp_path):
    """A resumed run opens a new writer on the same workdir: it replaces each kind's
    checkpoint with a later step, and keeps one of the same step (after a kill between
    `best` and `latest`) as it is on disk."""
    wd = str(tmp_path)
    model, _, state = state_of(hidden=8)
    later = state.replace(params=jax.tree_util.tree_map(lambda x: x * 2.0, state.params))
    with checkpoints.CheckpointWriter(wd) as writer:
        writer.save("best", 5, state, {"epoch": 1})
        writer.save("latest", 5, state, {"epoch": 1})
    with checkpoints.CheckpointWriter(wd) as writer:
        writer.save("best", 5, later, {"epoch": 1, "again": True})
        writer.save("latest", 9, later, {"epoch": 2})
    assert checkpoints.available(wd) == {"latest": 9, "best": 5}
    assert checkpoints.restore_meta(wd, "best") == {"epoch": 1}
    for kind, want in (("best", state), ("latest", later)):
        params, _, _ = checkpoints.restore_params(wd, kind, abstract_params(model))
        assert_trees_equal(params, want.params)
    assert sorted(os.listdir(os.path.join(wd, "checkpoints", "latest"))) == ["9"]


def test_an_unreadable_checkpoint_is_one_error_without_echoes(tmp_path, caplog, monkeypatch):
    """Truncated array files: restoring raises UnreadableCheckpointError naming the
    checkpoint, and the other array reads Orbax had in flight do not echo it (asyncio's
    "Future exception was never retrieved", Python's ignored "Event loop is closed").
    (Whether a read leaves stragglers is a race, hence several reads.)"""
    import gc
    import logging
    import sys

    wd = str(tmp_path)
    model, _, state = state_of(hidden=8)
    checkpoints.save(wd, "latest", 3, state, {"epoch": 1})
    step_dir = checkpoints.checkpoint_dir(wd, "latest", 3)
    for root, _, files in os.walk(os.path.join(step_dir, "state")):
        if os.path.basename(root) == "d":
            for name in files:
                with open(os.path.join(root, name), "r+b") as f:
                    f.truncate(50)
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for _ in range(4):
            with pytest.raises(checkpoints.UnreadableCheckpointError,
                               match=f"{step_dir}: unreadable"):
                checkpoints.restore_params(wd, "latest", abstract_params(model))
            gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
    assert [str(u.exc_value) for u in ignored] == []
