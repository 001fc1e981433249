"""Stand-in for optimum-neuron: its trainer classes as the training program imports them.

The real NeuronTrainer needs torch-neuronx and a Trainium device; this one is the HF Trainer
that says it was chosen, so a test can see nbtoolkit pick optimum-neuron's trainer when installed.
"""

from transformers import Trainer, TrainingArguments


class NeuronTrainingArguments(TrainingArguments):
    def __post_init__(self):
        self.use_cpu = True  # the stand-in trains on this machine's CPU
        super().__post_init__()


class NeuronTrainer(Trainer):
    def train(self, *args, **kwargs):
        assert isinstance(self.args, NeuronTrainingArguments)
        if self.is_world_process_zero():
            print("[fake optimum-neuron] NeuronTrainer.train", flush=True)
        return super().train(*args, **kwargs)
