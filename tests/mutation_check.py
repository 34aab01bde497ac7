"""Inject known bugs one at a time into a copy of the repository and check that
the tests catch each of them. Not collected by pytest (slow); run by hand:

    python tests/mutation_check.py            # every mutant
    python tests/mutation_check.py kl_swapped # some of them

Each mutant replaces one exact snippet of one file (it must occur exactly once)
and runs the test files that should catch it; a mutant the tests do not catch
is reported as SURVIVED and the script exits 1.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name -> (file, original snippet, mutated snippet, test files that must fail)
MUTANTS = {
    "alg2_renoise_with_beta_bar_t": (
        "ddgjax/processes/bitflip/sampler.py",
        "return q_sample(k2, x0, node_mask, bp, rho)",
        "return q_sample(k2, x0, node_mask, bt, rho)",
        ["tests/test_bitflip.py"]),
    "alg2_x0_from_negated_logits": (
        "ddgjax/processes/bitflip/sampler.py",
        "x0 = symmetric_upper_bernoulli(k1, jax.nn.sigmoid(logits), node_mask)",
        "x0 = symmetric_upper_bernoulli(k1, jax.nn.sigmoid(-logits), node_mask)",
        ["tests/test_shipped_quality.py"]),
    "draws_not_mirrored": (
        "ddgjax/processes/bitflip/transitions.py",
        ("& pair_mask(node_mask)).astype(jnp.float32)\n"
         "    return upper + jnp.swapaxes(upper, -1, -2)"),
        "& pair_mask(node_mask)).astype(jnp.float32)\n    return upper",
        ["tests/test_bitflip.py"]),
    "levels_in_ascending_order": (
        "ddgjax/processes/bitflip/sampler.py",
        "jnp.asarray(bb[:-1], jnp.float32), jnp.asarray(bb[1:], jnp.float32))",
        "jnp.asarray(bb[:-1][::-1], jnp.float32), jnp.asarray(bb[1:][::-1], jnp.float32))",
        ["tests/test_shipped_quality.py"]),
    "denoiser_told_no_noise": (
        "ddgjax/processes/bitflip/sampler.py",
        "jnp.full((b,), b_now, jnp.float32))",
        "jnp.zeros((b,), jnp.float32))",
        ["tests/test_shipped_quality.py"]),
    "alg2_x0_from_negated_logits_community": (
        "ddgjax/processes/bitflip/sampler.py",
        "x0 = symmetric_upper_bernoulli(k1, jax.nn.sigmoid(logits), node_mask)",
        "x0 = symmetric_upper_bernoulli(k1, jax.nn.sigmoid(-logits), node_mask)",
        ["tests/test_shipped_community.py"]),
    "levels_in_ascending_order_community": (
        "ddgjax/processes/bitflip/sampler.py",
        "jnp.asarray(bb[:-1], jnp.float32), jnp.asarray(bb[1:], jnp.float32))",
        "jnp.asarray(bb[:-1][::-1], jnp.float32), jnp.asarray(bb[1:][::-1], jnp.float32))",
        ["tests/test_shipped_community.py"]),
    "simple_weight_one_over_32": (
        "ddgjax/processes/bitflip/losses.py",
        "return 1.0 - 2.0 * beta_bar_t + 1.0 / num_timesteps",
        "return 1.0 - 2.0 * beta_bar_t + 1.0 / 32",
        ["tests/test_bitflip.py"]),
    "t_drawn_from_0_to_T_minus_1": (
        "ddgjax/processes/base.py",
        "jnp.clip(jnp.floor(u_t * num_timesteps).astype(jnp.int32) + 1, 1, num_timesteps)",
        "jnp.clip(jnp.floor(u_t * num_timesteps).astype(jnp.int32), 0, num_timesteps - 1)",
        ["tests/test_processes_base.py", "tests/test_bitflip.py"]),
    "kl_swapped": (
        "ddgjax/processes/bitflip/losses.py",
        "kl = binary_kl(q0, q1, p0, p1)",
        "kl = binary_kl(p0, p1, q0, q1)",
        ["tests/test_bitflip.py"]),
    "ppgn_without_inverse_sqrt_n": (
        "ddgjax/models/ppgn.py",
        "scale = jnp.where(mask_sq, inv_sqrt_n[:, None, None], 0.0).astype(self.compute_dtype)",
        "scale = mask_sq.astype(self.compute_dtype)",
        ["tests/test_models.py"]),
    "gradient_mean_instead_of_sum_over_devices": (
        "ddgjax/training/step.py",
        "lambda g: jax.lax.psum(g, AXIS) / total_pairs",
        "lambda g: jax.lax.pmean(g, AXIS) / total_pairs",
        ["tests/test_training.py"]),
    "gradient_not_summed_over_devices": (
        "ddgjax/training/step.py",
        "lambda g: jax.lax.psum(g, AXIS) / total_pairs",
        "lambda g: g / total_pairs",
        ["tests/test_training.py"]),
    "checkpoint_shape_check_removed": (
        "ddgjax/checkpoints.py",
        "        if w_shape != s_shape:\n",
        "        if False:\n",
        ["tests/test_checkpoints.py"]),
    "sampler_recompiled_every_call": (
        "ddgjax/sampling.py",
        "    if key not in _COMPILED:\n",
        "    if True:\n",
        ["tests/test_sampling.py"]),
    "sampling_ignores_the_configs_checkpoint": (
        "ddgjax/sampling.py",
        'field, name = "config.sample.checkpoint", config.sample.get("checkpoint", "best")',
        'field, name = "config.sample.checkpoint", "best"',
        ["tests/test_sampling.py"]),
    "posterior_prior_uses_beta_bar_t": (
        "ddgjax/processes/bitflip/transitions.py",
        "prior1 = jnp.where(a0 > 0.5, 1.0 - beta_bar_prev, beta_bar_prev)",
        "prior1 = jnp.where(a0 > 0.5, 1.0 - beta_bar_t, beta_bar_t)",
        ["tests/test_bitflip.py"]),
    "ema_weights_swapped": (
        "ddgjax/training/step.py",
        "lambda e, p: decay * e + (1 - decay) * p",
        "lambda e, p: (1 - decay) * e + decay * p",
        ["tests/test_training.py"]),
    "loss_counts_padding_pairs": (
        "ddgjax/processes/base.py",
        "per_graph = jnp.sum(jnp.where(pm, terms, 0.0), axis=(-1, -2))",
        "per_graph = jnp.sum(terms, axis=(-1, -2))",
        ["tests/test_bitflip.py", "tests/test_gaussian.py"]),
    "gaussian_sigma_as_signal_scale": (
        "ddgjax/processes/gaussian.py",
        "return broadcast_per_graph(sab) * x0 + broadcast_per_graph(sig) * eps",
        "return broadcast_per_graph(sig) * x0 + broadcast_per_graph(sab) * eps",
        ["tests/test_gaussian.py"]),
}


def copy_repo(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)


def run_mutant(name: str, work: Path) -> bool:
    """True if the tests catch the mutant (they fail), False if it survives."""
    path, old, new, tests = MUTANTS[name]
    target = work / path
    text = target.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"{name}: the snippet occurs {text.count(old)} times in {path}; "
                         "update MUTANTS")
    target.write_text(text.replace(old, new))
    try:
        # the copy's ddgjax must be the one imported (conftest puts the copy first on sys.path)
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly",
                              *tests], cwd=work, capture_output=True, text=True, timeout=1800)
    finally:
        target.write_text(text)
    caught = res.returncode != 0
    failed = [l for l in res.stdout.splitlines() if l.startswith("FAILED")]
    print(f"{'caught  ' if caught else 'SURVIVED'} {name}: {failed[0] if failed else res.stdout.strip().splitlines()[-1]}",
          flush=True)
    return caught


def main(names: list[str]) -> int:
    names = names or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise SystemExit(f"unknown mutant(s) {unknown}; known: {list(MUTANTS)}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        copy_repo(work)
        probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); "
                                "import conftest, ddgjax; print(ddgjax.__file__)"],
                               cwd=work, capture_output=True, text=True)
        assert probe.stdout.strip().startswith(str(work)), probe.stdout + probe.stderr
        t0 = time.time()
        survived = [n for n in names if not run_mutant(n, work)]
    print(f"{len(names) - len(survived)}/{len(names)} caught in {time.time() - t0:.0f} s")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
