"""One resume per job: concurrent or repeated resumes start one job; a user's script resumes only when it can,
in the original job's working directory."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest

from nbtoolkit.api import Job, launch, resume
from nbtoolkit.backends import LaunchError
from nbtoolkit.runner.control import job_launch
from nbtoolkit.spec import SpecError, load_spec
from tests.conftest import PYTHON, SCRIPTS

RESUME_IN_A_PROCESS = (
    "import sys; from nbtoolkit.api import resume; from nbtoolkit.runner import JobStore; "
    "print(resume(sys.argv[1], store=JobStore(sys.argv[2])).id)"
)


@pytest.fixture
def ended_script_job(store, tmp_path, monkeypatch) -> Job:
    """A job of a user's script, ended with a checkpoint in its folder, launched from `tmp_path/project` with
    a relative data argument; the test then runs from another directory."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "data.txt").write_text("from the project folder\n")
    monkeypatch.chdir(project)
    spec = {
        "task": "text-classification",
        "script": {"path": str(SCRIPTS / "resumable.py"), "args": ["--data", "data.txt"]},
    }
    job = launch(spec, store=store)
    assert job.wait(timeout=60) == "succeeded", job.logs()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return job


def test_concurrent_resumes_start_one_job_which_runs_where_the_first_ran(store, ended_script_job):
    job = ended_script_job
    answers: list[str] = []
    processes = [
        subprocess.Popen(
            [PYTHON, "-c", RESUME_IN_A_PROCESS, job.id, str(store.home)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    threads = [threading.Thread(target=lambda: answers.append(resume(job.id, store=store).id)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers += [process.communicate(timeout=60)[0].strip() for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    resumed = [record for record in store.list() if record.resumed_from == job.id]
    assert len(resumed) == 1 and set(answers) == {resumed[0].id}
    assert job.record.resumed_by == resumed[0].id
    second = Job(resumed[0].id, store)
    assert second.wait(timeout=60) == "succeeded", second.logs()
    # the script got the checkpoint, and its relative argument meant what it meant the first time
    assert f"resumed from {job.dir / 'output' / 'checkpoint-3'}\n" in second.logs()
    assert "data from the project folder\n" in second.logs()
    assert resume(job.id, store=store).id == second.id  # later, too, the answer is the first resume


def test_a_script_that_takes_no_checkpoint_is_not_resumed(store, ended_script_job):
    job = ended_script_job
    spec = job.spec.model_dump(mode="json")
    paced = SCRIPTS / "paced.py"  # reads no resume_from_checkpoint: resumed, it would start again at step 0
    (job.dir / "spec.json").write_text(
        job.spec.model_copy(
            update={"script": job.spec.script.model_copy(update={"path": str(paced)})}
        ).model_dump_json()
    )
    with pytest.raises(LaunchError) as refused:
        resume(job.id, store=store)
    assert str(refused.value) == (
        f"job {job.id} ran {paced}, which takes no checkpoint to resume from (its source never reads "
        "resume_from_checkpoint); set script.resume_arg to the option it takes one with"
    )
    assert job.record.resumed_by is None and spec["script"]["resume_arg"] is None
    # the spec says how: the option is passed
    told = job.spec.script.model_copy(update={"resume_arg": "--steps"})
    (job.dir / "spec.json").write_text(job.spec.model_copy(update={"script": told}).model_dump_json())
    second = resume(job.id, store=store)
    assert job_launch(second.dir).main_stage.argv[-2:] == ["--steps", str(job.dir / "output" / "checkpoint-3")]
    second.wait(timeout=60)


def test_a_job_that_reached_its_max_steps_is_not_resumed_to_train_nothing(store):
    """Its last checkpoint is at train.max_steps: resumed as it was, the Trainer took one step at learning rate 0
    (`step 22/21 (104%)`); a fork refused the same case."""
    record = store.create(name="done", task="text-classification", backend="local")
    store.update(record.id, status="succeeded")
    spec = load_spec({"task": "text-classification", "train": {"max_steps": 21}})
    (store.job_dir(record.id) / "spec.json").write_text(spec.model_dump_json())
    checkpoint = store.job_dir(record.id) / "output" / "checkpoint-21"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 21}))
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    for max_steps in (None, 21, 5):
        with pytest.raises(SpecError) as refused:
            resume(record.id, max_steps=max_steps, store=store)
        assert str(refused.value) == (
            f"train.max_steps {max_steps or 21} is not above the checkpoint's step 21: resuming job {record.id} "
            f"would train nothing; give a larger one, e.g. nbtoolkit resume {record.id} --max-steps 121"
        )
    assert [job.id for job in store.list()] == [record.id] and store.get(record.id).resumed_by is None
