"""A user's script that can resume (as an HfArgumentParser script takes --resume_from_checkpoint), without torch.

It reads `--data` (a path relative to where it runs), says what it read and what it resumed from,
and saves one complete checkpoint into the job folder, where `nbtoolkit resume` looks for it.
"""

import argparse
import json
import os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--resume_from_checkpoint")
args = parser.parse_args()
print(f"data {Path(args.data).read_text().strip()}", flush=True)
print(f"resumed from {args.resume_from_checkpoint}", flush=True)
checkpoint = Path(os.environ["NBTOOLKIT_JOB_DIR"]) / "output" / "checkpoint-3"
checkpoint.mkdir(parents=True)
(checkpoint / "model.safetensors").write_bytes(b"")
(checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
