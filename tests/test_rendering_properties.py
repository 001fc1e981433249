"""Property tests: any text in a spec field that reaches run.sh, launch.json or a SageMaker export stays data.

Each case renders the spec twice, with a benign value and with generated text (quotes, newlines, `$()`,
backticks, braces, `\"\"\"`); `bash -n` / `ast.parse` accept both renderings and they have the same
commands (bash words outside comments) / the same Python syntax tree up to literal values.
"""

from __future__ import annotations

import ast
import json
import shlex
import subprocess

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.dispatch import render
from nbtoolkit.backends.sagemaker.aws_errors import SageMakerSetupError
from nbtoolkit.backends.sagemaker.export import export_files
from nbtoolkit.backends.sagemaker.job import NEURON_CACHE, training_job
from nbtoolkit.spec import SpecError, load_spec

#: text meant to escape: shell and Python quoting, command substitution, comments, f-string braces.
#: No NUL: the OS cannot pass one in an argument or environment value, so no launch can hold it.
HOSTILE = (
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "\n",
                    "\r",
                    "\r\n",
                    "'",
                    '"',
                    '"""',
                    "'''",
                    "\\",
                    "$(touch /tmp/pwned)",
                    "`id`",
                    "${HOME}",
                    ";",
                    "&&",
                    "|",
                    "#",
                    "{",
                    "}",
                    "{neuron_cache}",
                    "{region}",
                    "{session.default_bucket()}",
                    " ",
                    "\t",
                    "-",
                    "--x",
                    "é",
                    "\x1b[A",
                ]
            ),
            st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=8),
        ),
        min_size=1,
        max_size=12,
    )
    .map("".join)
    .filter(bool)
)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROLE = "arn:aws:iam::111122223333:role/sagemaker"


def spec_with(field: str, value, base: dict) -> dict:
    """`base` with the dotted `field` set to `value`."""
    data = json.loads(json.dumps(base))
    *parents, last = field.split(".")
    target = data
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value
    return data


def bash_words(script: str) -> list[str]:
    """The words bash would read outside comments, after `bash -n` accepts the script."""
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    return shlex.split(script, comments=True)


def python_shape(source: str) -> str:
    """The syntax tree with every literal blanked: what code the file runs, not which strings it holds."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def rendered(data: dict):
    try:
        return render(load_spec(data))
    except (SpecError, LaunchError):
        return None  # refused with its sentence before anything is written: nothing to inject into


LOCAL_FIELDS = {  # field -> (benign value, base spec)
    "hardware.master_addr": ("node0", {"task": "text-classification", "hardware": {"devices": 2, "nodes": 2}}),
    "script.path": ("train.py", {"task": "text-classification", "script": {"path": "x"}}),
    "neuron.cache_dir": (
        "/var/tmp/cache",
        {"task": "text-classification", "hardware": {"accelerator": "neuron", "devices": 2}},
    ),
    "neuron.cc_flags": (
        "--model-type=transformer",
        {"task": "text-classification", "hardware": {"accelerator": "neuron", "devices": 2}},
    ),
    "name": ("run", {"task": "text-classification"}),
    "model": ("bert-base-uncased", {"task": "text-classification"}),
}


@pytest.mark.parametrize("field", sorted(LOCAL_FIELDS))
@PROPERTY
@given(text=HOSTILE)
def test_any_text_in_a_spec_field_stays_one_value_in_run_sh_and_launch_json(field, text):
    benign_value, base = LOCAL_FIELDS[field]
    benign, hostile = rendered(spec_with(field, benign_value, base)), rendered(spec_with(field, text, base))
    assert benign is not None
    if hostile is None:
        return
    assert len(bash_words(hostile.run_sh())) == len(bash_words(benign.run_sh()))
    assert json.loads(hostile.to_json())["stages"] == [{**stage.__dict__} for stage in hostile.stages]


@PROPERTY
@given(arg=HOSTILE)
def test_any_script_argument_stays_one_argument_in_run_sh(arg):
    base = {"task": "text-classification", "script": {"path": "train.py"}}
    benign = rendered(spec_with("script.args", ["--flag", "x"], base))
    hostile = rendered(spec_with("script.args", ["--flag", arg], base))
    words = bash_words(hostile.run_sh())
    assert len(words) == len(bash_words(benign.run_sh())) and arg in words


SAGEMAKER_BASE = {
    "task": "text-classification",
    "hardware": {"target": "sagemaker", "instance_type": "ml.p4d.24xlarge"},
    "sagemaker": {"role": ROLE, "region": "us-east-1"},
}
SAGEMAKER_FIELDS = {
    "sagemaker.role": "arn:aws:iam::1:role/x",
    "sagemaker.region": "eu-west-1",
    "sagemaker.bucket": "bucket",
    "sagemaker.image_uri": "image:{region}",
    "sagemaker.checkpoint_s3_uri": "s3://bucket/ckpt",
}


def export_shapes(data: dict, title: str) -> list[str] | None:
    try:
        job = training_job(load_spec(data))
    except (SpecError, SageMakerSetupError):
        return None
    return [python_shape(source) for source in export_files(job, title).values()]


@pytest.mark.parametrize("field", sorted(SAGEMAKER_FIELDS))
@PROPERTY
@given(text=HOSTILE)
def test_any_text_in_a_sagemaker_field_stays_a_literal_in_the_exports(field, text):
    benign = export_shapes(spec_with(field, SAGEMAKER_FIELDS[field], SAGEMAKER_BASE), "run")
    hostile = export_shapes(spec_with(field, text, SAGEMAKER_BASE), "run")
    assert benign is not None
    if field == "sagemaker.image_uri":  # the image names its region with `{region}` or not at all
        benign = export_shapes(
            spec_with(field, "image" + ("{region}" if "{region}" in text else ""), SAGEMAKER_BASE), "run"
        )
    assert hostile is None or hostile == benign


@PROPERTY
@given(title=HOSTILE, value=HOSTILE, arg=HOSTILE)
def test_a_title_environment_value_or_hyperparameter_never_becomes_code_in_the_exports(title, value, arg):
    assume(not arg.lstrip().startswith("-"))

    def benign_of(text: str) -> str:  # naming the compile cache is meant to reach the script's `neuron_cache`
        return "x" + (NEURON_CACHE if NEURON_CACHE in text else "")

    script = {"path": __file__, "args": ["--token_name", arg]}
    hostile = spec_with("sagemaker.environment", {"MY_SETTING": value}, spec_with("script", script, SAGEMAKER_BASE))
    benign = spec_with(
        "sagemaker.environment",
        {"MY_SETTING": benign_of(value)},
        spec_with("script", {**script, "args": ["--token_name", benign_of(arg)]}, SAGEMAKER_BASE),
    )
    assert export_shapes(hostile, title) == export_shapes(benign, "run")


def test_a_newline_in_master_addr_is_no_command_in_run_sh():
    launch = render(
        load_spec(spec_with("hardware.master_addr", "node0\ntouch /tmp/pwned", LOCAL_FIELDS["hardware.master_addr"][1]))
    )
    assert "touch" not in bash_words(launch.run_sh())  # it stays inside the quoted rendezvous endpoint


def test_braces_in_an_environment_value_are_not_evaluated_by_the_export(tmp_path):
    data = spec_with(
        "sagemaker.environment", {"CACHE_FLAGS": "--cache={neuron_cache} {__import__('os').getpid()}"}, SAGEMAKER_BASE
    )
    source = export_files(training_job(load_spec(data)), 'x"""\nimport os\n"""')["sagemaker/launch_v3.py"]
    assert "f'--cache" not in source and "import os\n" not in source
    environment = next(
        node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.keyword) and node.arg == "environment"
    )
    value = next(
        v for k, v in zip(environment.value.keys, environment.value.values, strict=False) if k.value == "CACHE_FLAGS"
    )
    namespace = {"neuron_cache": "s3://b/cache"}
    assert (
        eval(compile(ast.Expression(value), "export", "eval"), namespace)
        == "--cache=s3://b/cache {__import__('os').getpid()}"
    )
