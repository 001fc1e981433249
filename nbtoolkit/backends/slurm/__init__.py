"""The `slurm` backend (`hardware.target: slurm`): a Slurm batch job whose nodes run the same launch as here.

`spec` holds the spec's `slurm` block and rules (light: the spec imports it), `sbatch` renders the
job script and each node's launch, `backend` is what the backend registry loads (NAME, render,
preflight), and `follow` is the detached program that submits the job, streams its output, follows
its state and cancels it on stop.
"""
