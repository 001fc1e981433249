import logging
import os
import sys

from nbtoolkit.launching.runtime import die_with_parent
from nbtoolkit.train.program import main

die_with_parent()  # a rank under a launcher killed with its supervisor ends too
code = main()
distributed = getattr(sys.modules.get("torch"), "distributed", None)
if distributed is not None and distributed.is_available() and distributed.is_initialized():
    # the process group's threads joined before the interpreter exits: left running, they can abort a finished
    # rank ("terminate called without an active exception", SIGABRT; seen once in three full suites on 2 ranks)
    distributed.destroy_process_group()
if sys.modules.get("deepspeed") is not None:  # None: hidden, unused (program.hide_unused_integrations)
    # DeepSpeed's compiled CPU ops can abort in their C++ destructors at interpreter exit ("terminate
    # called without an active exception"; seen about once in ten ZeRO-3 offload runs on 2 ranks),
    # failing a run whose model and metrics are already written. Leave without running them.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
