"""A spawn Pool whose task function the workers cannot find: workers die, Pool.map hangs.

Modelled on jupyter/notebook#5261 ("multiprocessing.Pool stuck indefinitely": spawn workers
die with "AttributeError: Can't get attribute 'f' on <module '__main__' (built-in)>",
https://github.com/jupyter/notebook/issues/5261) and microsoft/vscode-jupyter#12485
("AttributeError: Can't get attribute 'get_cdmx_dist' on <module '__mp_main__' from ...>").
Here the script is guarded, but the task function is defined inside the
`if __name__ == "__main__":` block (as code pasted from a notebook cell ends up): a spawn
worker re-imports the script as __mp_main__, where the block does not run, so unpickling
the task fails in the worker's `task = get()` with AttributeError: Can't get attribute
'score' on <module '__mp_main__'>. The worker exits with status 1 and the Pool starts a
replacement; every task chunk (5 here) kills the worker that takes it, then the
replacements sit idle on an empty task queue and `pool.map` waits for ever for the lost
results (with more tasks the deaths go on longer). The fix: define the task function at
module top level (or in an importable module), outside the main guard.
"""
import multiprocessing

if __name__ == "__main__":
    def score(x):
        return x * 2

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        print(pool.map(score, range(10)))
