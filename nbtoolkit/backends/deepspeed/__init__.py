"""The `deepspeed` backend: ZeRO stage 0-3 with optimizer/parameter offload, via the HF Trainer.

`ds_config.json` says "auto" wherever the HF integration fills a value from TrainingArguments
(batch sizes, accumulation, clipping, precision, optimizer settings), so it cannot disagree
with the spec. A generated config keeps the Trainer's own optimizer and LR schedule, the same
as a plain DDP run's, except under optimizer offload, which needs DeepSpeed's CPU Adam. The
four configs of the FLAN-T5 XL/XXL tutorial are there by name (`parallelism.deepspeed_config`).

Processes start through torchrun (rank-prefixed logs, c10d rendezvous), or through DeepSpeed's
own launcher with `launcher: deepspeed`: `--num_gpus` workers per node, and on several nodes a
hostfile with `--no_ssh --node_rank`, each node started by its own run.sh.
"""

from nbtoolkit.backends import Backend

backend = Backend(name="deepspeed", implementation=f"{__name__}.render")
