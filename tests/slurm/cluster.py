"""A one-node Slurm cluster of Debian's slurm-wlm, started in a folder of its own for the Slurm tests.

munged, slurmctld and slurmd run as root with every socket, pid, spool, state and log path under
that folder (nothing in /etc or /run is touched), so the cluster can be started and ended by the
test session alone. Clients find it through SLURM_CONF.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
MISSING = (
    "Slurm is not installed here (no {name} on PATH): `make test-setup` installs it "
    "(apt-get install -y slurm-wlm munge)"
)
START_S = 60.0
PARTITION = "debug"


def missing_programs() -> str | None:
    """The sentence that says how to install Slurm, when one of its programs is missing."""
    for name in ("sbatch", *DAEMONS):
        if shutil.which(name) is None and not Path("/usr/sbin", name).exists():
            return MISSING.format(name=name)
    return None


def slurm_conf(root: Path, cpus: int) -> str:
    """The settings FACTS.md lists: no cgroups, no accounting daemon, root as SlurmUser, paths under `root`."""
    host = socket.gethostname().split(".")[0]
    return f"""\
ClusterName=nbtoolkit-test
SlurmctldHost={host}(localhost)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmdSpoolDir={root}/spool
StateSaveLocation={root}/state
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
KillWait=5
MinJobAge=600
NodeName=localhost NodeHostname={host} CPUs={cpus} RealMemory=2000 State=UNKNOWN
PartitionName={PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Cluster:
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    daemons: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def start(self) -> None:
        for folder in ("spool", "state", "munge"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(slurm_conf(self.root, os.cpu_count() or 1))
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        # -F: in the foreground, so each daemon is our child and ends with it
        self._daemon(
            [
                sbin("munged"),
                "-F",
                "--force",
                f"--socket={self.root}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={self.root}/munged.pid",
                f"--log-file={self.root}/munged.log",
                f"--seed-file={self.root}/munge.seed",
            ]
        )
        self._wait(lambda: (self.root / "munge.socket").exists(), "munged made no socket")
        self._daemon([sbin("slurmctld"), "-D", "-i"])
        self._wait(lambda: self._ok(["scontrol", "ping"], "UP"), "slurmctld did not answer `scontrol ping`")
        self._daemon([sbin("slurmd"), "-D"])
        self._wait(lambda: self._ok(["sinfo", "-h", "-o", "%t"], "idle"), "the node did not become idle in sinfo")

    def _daemon(self, argv: list[str]) -> None:
        log = open(self.root / f"{Path(argv[0]).name}.out", "wb")  # noqa: SIM115 - the daemon keeps it
        self.daemons.append(
            subprocess.Popen(
                argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def _ok(self, argv: list[str], expected: str) -> bool:
        result = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        return result.returncode == 0 and expected in result.stdout

    def _queued(self) -> str:
        result = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else ""

    def _wait(self, ready, problem: str) -> None:
        deadline = time.monotonic() + START_S
        while not ready():
            ended = [daemon for daemon in self.daemons if daemon.poll() is not None]
            if ended or time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}"
                    for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out"))
                )
                self.stop()
                raise RuntimeError(f"{problem}\n{logs}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Cancel what still runs, then end the daemons in reverse order and wait for each (no daemon, and no
        slurmstepd of a job, outlives the session)."""
        if self.daemons and all(daemon.poll() is None for daemon in self.daemons):
            subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True)
            deadline = time.monotonic() + 30
            while self._queued() and time.monotonic() < deadline:  # completing jobs are listed too
                time.sleep(0.5)
        for daemon in reversed(self.daemons):
            if daemon.poll() is None:
                daemon.terminate()
                try:
                    daemon.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        self.daemons.clear()
