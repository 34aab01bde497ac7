"""Pick the sampler setting with the highest validity from a planar_levers.py sample
result and print the matching ``vun_eval.py`` arguments. Validity needs no reference
graphs, so this choice never looks at the test split; run it on a sampling seed that the
final evaluation does not use.

    python benchmarks/select_sampler.py OUT/select_seed100.json best_p60
"""
import json
import sys

from planar_levers import SAMPLERS


def main():
    path, run = sys.argv[1], sys.argv[2]
    results = json.load(open(path))["results"][run]
    best = max(results, key=lambda k: results[k]["valid"])  # ties: the first listed
    steps, use_ema, options = SAMPLERS[best]
    args = [f"--num_steps {steps}"] + [f"--option {k}={v}" for k, v in options.items()]
    print(json.dumps({k: results[k]["valid"] for k in results}), file=sys.stderr)
    print(f"chosen: {best}", file=sys.stderr)
    print(" ".join(args + (["--ema"] if use_ema else [])))


if __name__ == "__main__":
    main()
