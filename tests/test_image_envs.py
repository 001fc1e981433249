"""The image fact tables (tests/facts/images) and their locks: every real launch meets the image its table names, the
table holds what that launch's requirements.txt asks for, and each requirements-image-NAME.lock pins the image's
packages (what requirements.txt lifts, lifted), hashed, torch as its CPU build. The rehearsals in these
environments are tests/images (`make test-images`)."""

from __future__ import annotations

import re

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from nbtoolkit.backends.sagemaker.container import code_files
from nbtoolkit.launching.image_pins import PINS
from nbtoolkit.rehearsal.image_envs import (
    LOCK_MACHINE,
    ImageEnvError,
    ImageStack,
    build,
    image_run,
    pins_file,
    stack_of,
    stacks,
)
from tests.real_launches import GOLDEN, as_launched, real_specs

#: the real launch whose machine installs nbtoolkit itself, with the lock (FLAN-T5 on a p4d with DeepSpeed)
ON_THE_LOCK = {"flan-t5-xxl"}
REQUIREMENTS_TXT = "sagemaker/code/requirements.txt"


def locked(stack: ImageStack) -> dict[str, tuple[Version, list[str]]]:
    entries = {}
    for block in re.split(r"\n(?=\S)", stack.lock.read_text()):
        if pinned := re.match(r"([A-Za-z0-9._-]+)==(\S+)", block):
            entries[canonicalize_name(pinned[1])] = (Version(pinned[2]), re.findall(r"--hash=sha256:(\w{64})", block))
    return entries


@pytest.mark.parametrize("name", sorted(real_specs()))
def test_every_real_launch_meets_the_image_its_table_lists(name):
    stack = stack_of(as_launched(name, real_specs()[name]))
    if name in ON_THE_LOCK:
        assert stack is None
        return
    assert stack is not None and name in stack.launches, (name, stack)
    requirements_txt = GOLDEN / name / REQUIREMENTS_TXT
    if requirements_txt.is_file():  # what the container's pip is asked for, the environment holds
        lock = locked(stack)
        for line in requirements_txt.read_text().split():
            requirement = Requirement(line)
            assert requirement.specifier.contains(lock[canonicalize_name(requirement.name)][0]), (name, line)


@pytest.mark.parametrize(
    "name", sorted(path.parent.parent.parent.name for path in GOLDEN.glob(f"*/{REQUIREMENTS_TXT}"))
)
def test_each_containers_requirements_txt_pins_what_its_image_lock_lifts_at_the_locks_version(name):
    """On the day the job runs, the container's pip must install what the rehearsal ran with: every package of the
    image's table that the lock holds at another version is pinned (==) to the lock's version, and nothing else is."""
    stack = stack_of(as_launched(name, real_specs()[name]))
    assert stack is not None
    lock = locked(stack)
    image_own = {
        canonicalize_name(Requirement(line).name): Version(line.split("==")[1])
        for line in stack.packages
        if "==" in line
    }
    lifted = {package: lock[package][0] for package, own in image_own.items() if lock[package][0] != own}
    pinned = {
        canonicalize_name(Requirement(line).name): Version(line.split("==")[1])
        for line in (GOLDEN / name / REQUIREMENTS_TXT).read_text().split()
        if "==" in line
    }
    assert pinned == lifted
    assert "pyarrow<26" in (GOLDEN / name / REQUIREMENTS_TXT).read_text().split()


def test_gpt2s_environment_holds_none_of_the_chat_runs_trl_lifts():
    """GPT-2 on the 5.3.0 image names no TRL, so its container keeps the image's TRL 0.28.0: its environment is
    locked apart from the chat runs', whose requirements.txt lifts TRL to 1.16."""
    gpt2 = stack_of(as_launched("gpt2-wikitext-sagemaker", real_specs()["gpt2-wikitext-sagemaker"]))
    chat = stack_of(as_launched("chat-sft-qwen", real_specs()["chat-sft-qwen"]))
    assert gpt2 is not None and chat is not None and gpt2.image == chat.image
    assert locked(gpt2)["trl"][0] == Version("0.28.0") and locked(chat)["trl"][0] == Version("1.16.0")
    assert "trl" not in (GOLDEN / "gpt2-wikitext-sagemaker" / REQUIREMENTS_TXT).read_text()


def test_the_shipped_pins_are_those_of_the_locks_as_they_are():
    assert PINS.read_text() == pins_file(), (
        "nbtoolkit/launching/image_pins.json is older than the image locks: run `make lock`"
    )


def test_a_user_image_of_a_release_without_a_table_keeps_the_ranges():
    spec = real_specs()["gpt2-wikitext-sagemaker"]
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
    lines = code_files(spec, image)[REQUIREMENTS_TXT].split()
    assert "datasets>=4.7.0" in lines and [line for line in lines if "==" in line] == []


def test_every_table_names_only_real_launches_and_each_once():
    listed = [launch for stack in stacks().values() for launch in stack.launches]
    assert sorted(listed) == sorted(set(real_specs()) - ON_THE_LOCK)


@pytest.mark.parametrize("stack", stacks().values(), ids=lambda stack: stack.name)
def test_each_image_lock_pins_the_images_packages_or_what_requirements_txt_lifts_them_to(stack):
    lock = locked(stack)
    for line in stack.requirements():
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{line} is not in {stack.lock.name}: run `make lock`"
        assert requirement.specifier.contains(lock[name][0], prereleases=True), (line, lock[name][0])
    assert [name for name, (_, hashes) in lock.items() if not hashes] == []
    assert lock["torch"][0].local == "cpu"
    assert [name for name in lock if name.startswith("nvidia-") or name == "triton"] == []


def test_what_requirements_txt_lifts_is_lifted_and_the_rest_stays_the_images():
    """The 5.3.0 image's TRL 0.28 is below the chat runs' trl>=1.16 (lifted); its transformers 5.3.0 and PEFT 0.18.1
    satisfy their lines (kept). A Trainium run's requirements.txt leaves the Neuron stack alone."""
    gpu = locked(stacks()["hf-gpu-5.3.0-chat"])
    assert gpu["trl"][0] >= Version("1.16") and gpu["transformers"][0] == Version("5.3.0")
    assert gpu["peft"][0] == Version("0.18.1") and gpu["datasets"][0] >= Version("4.7")
    neuron = locked(stacks()["hf-neuronx-sdk2.26"])
    assert (neuron["transformers"][0], neuron["datasets"][0], neuron["accelerate"][0]) == tuple(
        map(Version, ("4.55.4", "4.1.1", "1.8.1"))
    )
    assert neuron["optimum-neuron"][0] == Version("0.4.1")


def test_an_image_that_holds_numpy_below_2_is_locked_with_a_pyarrow_that_imports_beside_it():
    """The 5.3.0 image's Dockerfile forces dill 0.3.8 and multiprocess 0.70.16 and upgrades pyarrow beside
    "numpy<2"; pyarrow 26 declares no NumPy requirement but refuses NumPy 1.x at import, so requirements.txt's
    pyarrow<26 must hold in every environment whose NumPy is 1.x (the Neuron one's too)."""
    gpu = locked(stacks()["hf-gpu-5.3.0"])
    assert (gpu["numpy"][0], gpu["dill"][0], gpu["multiprocess"][0]) == tuple(
        map(Version, ("1.26.4", "0.3.8", "0.70.16"))
    )
    numpy_1 = [name for name, stack in stacks().items() if locked(stack)["numpy"][0].major < 2]
    assert {"hf-gpu-5.3.0", "hf-gpu-5.3.0-vision-chat", "hf-neuronx-sdk2.26"} <= set(numpy_1)
    assert [name for name in numpy_1 if locked(stacks()[name])["pyarrow"][0] >= Version("26")] == []


def test_an_image_without_its_lock_is_one_sentence_naming_the_command(tmp_path, monkeypatch):
    stack = stacks()["hf-gpu-4.56.2"]
    monkeypatch.setattr(ImageStack, "lock", property(lambda self: tmp_path / "requirements-image-missing.lock"))
    with pytest.raises(ImageEnvError, match=r"^requirements-image-missing.lock is missing: `make lock` writes it"):
        build(stack)


def test_an_image_without_a_table_is_one_sentence_naming_the_tables():
    spec = real_specs()["gpt2-wikitext-sagemaker"]
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
    spec = spec.model_copy(update={"sagemaker": spec.sagemaker.model_copy(update={"image_uri": image})})
    with pytest.raises(
        ImageEnvError, match=r"^no fact table of the image .*transformers4\.49\.0.* \(tests/facts/images/ has "
    ):
        stack_of(spec)


def test_a_run_no_lock_of_its_image_covers_is_warned_that_its_container_picks_its_versions_the_day_it_runs():
    """LoRA on the p3 image (4.56.2): no lock of that image was made with PEFT's lift, so requirements.txt keeps
    ranges; rendering it says so (the rehearsal in its packages is refused above), a covered run says nothing."""
    import warnings

    from nbtoolkit.backends.dispatch import render
    from nbtoolkit.spec import SpecWarning

    lora = real_specs()["bert-qa-sagemaker"].model_copy(update={"adapter": {"r": 8}})
    with pytest.warns(SpecWarning, match=r"^no lock of the image .*transformers4\.56\.2.* with the adapters extra"):
        requirements = render(lora).files["sagemaker/code/requirements.txt"]
    assert "peft>=" in requirements and "==" not in requirements.replace("pyarrow<26", "")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        render(real_specs()["gpt2-wikitext-sagemaker"])


def test_a_trainium_job_is_rehearsed_in_the_neuron_sdks_packages_only_when_it_runs_that_image():
    """SageMaker on trn1 with nbtoolkit's image, or a trn1 machine set up as the docs say: SDK 2.26's table. A
    Neuron image of the user's own is not that table's: one sentence, not a rehearsal in packages it will not meet."""
    from nbtoolkit.spec import SpecWarning, load_spec

    trn1 = {"target": "sagemaker", "instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"}
    spec = {"task": "text-classification", "hardware": trn1, "sagemaker": {"role": "arn:aws:iam::1:role/r"}}
    assert stack_of(load_spec(spec)).name == "hf-neuronx-sdk2.26"
    assert stack_of(load_spec({"task": "text-classification", "hardware": {"accelerator": "neuron"}})).name == (
        "hf-neuronx-sdk2.26"
    )
    own = "111122223333.dkr.ecr.us-east-1.amazonaws.com/my-neuronx-training:latest"
    with pytest.warns(SpecWarning):
        theirs = load_spec({**spec, "sagemaker": {**spec["sagemaker"], "image_uri": own}})
    with pytest.raises(ImageEnvError, match=r"^no fact table of the image .*my-neuronx-training:latest .*SDK 2.26's"):
        stack_of(theirs)


def test_a_run_whose_requirements_lift_what_its_image_table_was_not_locked_with_is_one_sentence():
    """A LoRA run on the p3 image: its requirements.txt lifts PEFT, the table's environment has the image's own."""
    spec = real_specs()["bert-qa-sagemaker"].model_copy(update={"adapter": {"r": 8}})
    assert "adapters" in spec.extras_used
    with pytest.raises(
        ImageEnvError, match=r"^the image environment hf-gpu-4\.56\.2 is locked for runs without the adapters extra"
    ):
        stack_of(spec)


def test_a_run_on_the_lock_is_rehearsed_under_the_lock_and_says_so(tmp_path):
    run = image_run(real_specs()["flan-t5-xxl"], tmp_path)
    assert (run.python, run.env, run.line) == (None, {}, LOCK_MACHINE)
    assert not (tmp_path / "code").exists()  # nothing shipped: the program runs installed, as on that machine
