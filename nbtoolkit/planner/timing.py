"""Time per optimizer step: compute from peak FLOP/s and a utilisation, plus what cannot overlap.

FLOPs per sample ≈ 6 · (weights each token passes through) · tokens (forward 2, backward 4;
Kaplan et al. 2020), 8 · with gradient checkpointing (one more forward). Collectives overlap
with compute (DeepSpeed's overlap_comm, DDP's buckets); CPU offload transfers and the CPU Adam
step do not. Every constant here is an assumption a measured run should replace.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbtoolkit.planner.shapes import ModelShape

#: achieved fraction of the accelerator's peak dense FLOP/s (HF Trainer, transformer fine-tuning)
DEFAULT_UTILISATION = 0.35
#: achieved fraction of a link's datasheet bandwidth (collectives, host <-> device copies)
LINK_EFFICIENCY = 0.5
#: DeepSpeed CPU-Adam parameter updates per second per instance (order of magnitude, ZeRO-Offload paper)
CPU_ADAM_PARAMS_PER_SECOND = 1e9


def flops_per_sample(
    shape: ModelShape, input_length: int, target_length: int, checkpointing: bool, *, images: bool = False
) -> float:
    """Training FLOPs for one sample: k · Σ weights x tokens, k = 6 (8 with checkpointing).

    Embedding lookups cost no matmul FLOPs and are left out; attention-score FLOPs
    (about 2% at 512 tokens for these models) are left out too. A vision-language sample (`images`: a task that
    reads them) holds one image: its patches go forward through the frozen vision tower once (2 · weights x patches,
    no backward); a text task never runs the tower.
    """
    factor = 8 if checkpointing else 6
    tokens = shape.input_matmul_params * input_length
    tokens += shape.target_matmul_params * (target_length if shape.decoder_layers else 0)
    return factor * tokens + (2 * shape.vision_params * shape.image_patches if images else 0)


@dataclass(frozen=True)
class Hardware:
    """The numbers of one setup that step time depends on."""

    peak_flops: float  # per device, for the precision in use
    devices_per_node: int
    nodes: int
    device_link_gbs: float | None  # between devices of a node
    network_gbps: float | None  # between nodes
    host_link_gbs: float | None  # device <-> host memory

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    def collective_seconds(self, volume_bytes: float) -> float | None:
        """Seconds for a collective that moves `volume_bytes` per participant (ring factor left out), or None if a
        link speed is unknown.

        Collectives run hierarchically (NCCL's rings and trees): inside a node over the device links, between
        nodes over each node's network link carrying that node's share once, not once per device. The slower
        of the two levels sets the time.
        """
        if self.devices == 1:
            return 0.0
        seconds = []
        if self.devices_per_node > 1:
            if self.device_link_gbs is None:
                return None
            ring = (self.devices_per_node - 1) / self.devices_per_node
            seconds.append(volume_bytes * ring / (self.device_link_gbs * 1e9 * LINK_EFFICIENCY))
        if self.nodes > 1:
            if self.network_gbps is None:
                return None
            ring = (self.nodes - 1) / self.nodes
            seconds.append(volume_bytes * ring / (self.network_gbps / 8 * 1e9 * LINK_EFFICIENCY))
        return max(seconds)


@dataclass(frozen=True)
class StepTime:
    compute: float  # seconds of matmuls per optimizer step
    communication: float  # seconds of collectives per optimizer step (overlapped with compute)
    offload: float  # seconds of host copies and CPU Adam per optimizer step (not overlapped)
    total: float
    communication_modelled: bool


def step_time(
    *,
    hardware: Hardware,
    flops_per_micro_batch: float,
    grad_accum: int,
    utilisation: float,
    params: float,
    weight_bytes: int,
    zero_stage: int,
    offload_optimizer: bool,
    offload_params: bool,
) -> StepTime:
    """Seconds per optimizer step of `grad_accum` micro-batches on every device."""
    compute = flops_per_micro_batch / (hardware.peak_flops * utilisation)
    n = hardware.devices
    weights = weight_bytes * params
    if zero_stage >= 3:  # gather weights for forward and backward, reduce-scatter gradients
        per_micro, per_step = 3 * weights, 0.0
    elif zero_stage == 2:  # reduce-scatter gradients every micro-batch, gather weights after the step
        per_micro, per_step = weights, weights
    else:  # all-reduce gradients once per step (DDP no_sync; ZeRO-1 reduce + gather)
        per_micro, per_step = 0.0, 2 * weights
    micro_comm, step_comm = hardware.collective_seconds(per_micro), hardware.collective_seconds(per_step)
    modelled = micro_comm is not None
    micro_comm, step_comm = micro_comm or 0.0, step_comm or 0.0
    micro = max(compute, micro_comm)
    total = (grad_accum - 1) * micro + max(compute, micro_comm + step_comm)
    offload = 0.0
    host_link = (hardware.host_link_gbs or 0) * 1e9 * LINK_EFFICIENCY
    if offload_optimizer:
        partition = params / n
        offload += params / hardware.nodes / CPU_ADAM_PARAMS_PER_SECOND
        offload += 2 * weight_bytes * partition / host_link if host_link else 0.0  # gradients out, weights back
    if offload_params:
        offload += grad_accum * 2 * weight_bytes * params / n / host_link if host_link else 0.0
    return StepTime(
        compute=grad_accum * compute,
        communication=grad_accum * micro_comm + step_comm,
        offload=offload,
        total=total + offload,
        communication_modelled=modelled,
    )
