"""Sample graphs from a trained run: the same command as ``ddgjax-sample``
(``ddgjax/cli/sample.py``; ``python sample.py --help`` lists the flags).

    python sample.py --workdir runs/cs --num_samples 1024
"""
from ddgjax.cli.sample import run

if __name__ == "__main__":
    run()
