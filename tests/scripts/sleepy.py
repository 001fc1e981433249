"""A stand-in training script for lifecycle tests: logs Trainer-style lines (a dict, then the bar at its step) forever and
starts child processes (one in its own session) that a stop must end too."""

import os
import subprocess
import sys
import time

children = [
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]),
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True),
]
print(f"ready pids {os.getpid()} {' '.join(str(child.pid) for child in children)}", flush=True)
step = 0
print("\r  0%|          | 0/100000 [00:00<?, ?it/s]", end="", file=sys.stderr, flush=True)
while True:
    step += 1
    # as the Trainer's tqdm.write: clear the bar, print the dict, draw the bar again at this step
    print(f"\r{' ' * 40}\r", end="", file=sys.stderr, flush=True)
    print(f"{{'loss': '{3.0 / step:.4f}', 'learning_rate': '0.001', 'epoch': '{step / 100:.2f}'}}", flush=True)
    print(f"\r  0%|          | {step}/100000 [00:01<99:00:00,  5.00it/s]", end="", file=sys.stderr, flush=True)
    time.sleep(0.2)
