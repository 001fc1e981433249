"""A stand-in training script for lifecycle tests: logs Trainer-style lines forever and
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
while True:
    step += 1
    print(f"{{'loss': '{3.0 / step:.4f}', 'learning_rate': '0.001', 'epoch': '{step / 100:.2f}'}}", flush=True)
    time.sleep(0.2)
