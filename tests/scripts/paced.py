"""A stand-in job for fault tests: `--steps` Trainer-style log lines, `--pace` seconds apart, then `done`.

`--child` starts a grandchild in its own session that sleeps (the orphan a dead supervisor would
leave); `--own-metrics` writes records to metrics.jsonl itself instead (with odd values among
them, as a user's script might); `--echo-token` prints the token it got (and reversed, which no scrubber knows); `--dribble-env NAME` prints a
variable's value a character at a time; `--refuse-stop` answers SIGTERM as a program that could not
stop what it runs: one `[nbtoolkit] error:` sentence, exit 2.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--pace", type=float, default=0.2)
parser.add_argument("--child", action="store_true")
parser.add_argument("--own-metrics", action="store_true")
parser.add_argument("--refuse-stop", action="store_true")
parser.add_argument("--echo-token", help="print the token it was given (tests of credentials from the environment)")
parser.add_argument("--dribble-env", help="print this variable's value a character at a time, each flushed")
args = parser.parse_args()
if args.dribble_env:
    for character in os.environ[args.dribble_env]:
        print(character, end="", flush=True)
        time.sleep(0.12)  # longer than torchrun's tee waits between reads: it writes each character on its own
    print(flush=True)
if args.echo_token:
    print(f"token seen: {args.echo_token} reversed {args.echo_token[::-1]}", flush=True)  # the log scrubs the first

if args.refuse_stop:

    def refuse(*_):
        print("[nbtoolkit] error: could not stop the remote run: permission denied", file=sys.stderr, flush=True)
        sys.exit(2)

    signal.signal(signal.SIGTERM, refuse)
if args.child:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    print(f"child {child.pid}", flush=True)
ODD = [{"step": "abc"}, {"loss": {"value": 1.0}}, {"learning_rate": [1, 2]}, {"loss": "0.5"}]
for step in range(1, args.steps + 1):
    time.sleep(args.pace)
    if args.own_metrics:
        record = {"time": time.time(), "step": step, "kind": "train", "loss": 3.0 / step, "max_steps": args.steps}
        record.update(ODD[step % len(ODD)])
        with open("metrics.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
    else:
        print(f"[nbtoolkit] step {step}/{args.steps}", flush=True)
        print(
            f"{{'loss': '{3.0 / step:.4f}', 'learning_rate': '0.001', 'epoch': '{step / args.steps:.2f}'}}", flush=True
        )
print("done", flush=True)
