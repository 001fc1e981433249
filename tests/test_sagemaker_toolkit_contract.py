"""The SageMaker stand-in and nbtoolkit's entry script against the toolkit real containers run.

SageMaker's Hugging Face training images set a job's SM_* variables and /opt/ml folders through the sagemaker-training
toolkit; tools/sagemaker_training_facts.py reads what it sets from its own source into
tests/facts/sagemaker-training-5.1.4.json. A test here fails when the entry script reads a variable or folder the
real container would not have, or the stand-in names one differently, so a stand-in run cannot pass on a name only
the stand-in knows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from nbtoolkit.backends.sagemaker.container import ENTRY_SOURCE
from nbtoolkit.backends.sagemaker.standin import Container

FACTS = json.loads((Path(__file__).resolve().parent / "facts" / "sagemaker-training-5.1.4.json").read_text())


def set_by_the_toolkit(name: str) -> bool:
    return name in FACTS["variables"] or any(
        name.startswith(prefix) and len(name) > len(prefix) for prefix in FACTS["variable_prefixes"]
    )


def test_every_sm_variable_the_entry_script_reads_is_one_the_real_container_sets():
    read = set(re.findall(r"\bSM_[A-Z_]+[A-Z]\b", ENTRY_SOURCE))
    assert read == {"SM_OUTPUT_DATA_DIR", "SM_CHANNEL_MODEL", "SM_INPUT_DIR", "SM_MODEL_DIR"}
    assert all(set_by_the_toolkit(name) for name in read), sorted(name for name in read if not set_by_the_toolkit(name))
    folders = FACTS["folders"]
    for variable, default in re.findall(r'os\.environ\.get\("(SM_[A-Z_]+)", "(/opt/ml[^"]*)"\)', ENTRY_SOURCE):
        expected = {"SM_OUTPUT_DATA_DIR": "output_data_dir", "SM_INPUT_DIR": "input_dir", "SM_MODEL_DIR": "model_dir"}
        assert default == folders[expected[variable]], variable  # the fallback is the folder itself


def test_the_stand_in_sets_the_toolkits_names_and_folders(tmp_path):
    fetched = []
    standin = SimpleNamespace(root=tmp_path, download=lambda uri, folder: fetched.append((uri, folder)))
    request = {
        "InputDataConfig": [
            {"ChannelName": name, "DataSource": {"S3DataSource": {"S3Uri": f"s3://bucket/{name}"}}}
            for name in ("code", "data-train")
        ]
    }
    container = Container(standin, "job-1", request)
    channels = container.fetch_channels()
    variables = container.sagemaker_variables(channels, {"epochs": "3", "a": "x"})
    named = {name for name in variables if name.startswith("SM_")}
    assert all(set_by_the_toolkit(name) for name in named), sorted(
        name for name in named if not set_by_the_toolkit(name)
    )
    assert {"SM_CHANNEL_CODE", "SM_CHANNEL_DATA-TRAIN"} <= named  # channel_<name>, upper-cased as the toolkit does
    folders = {key: value.replace("/opt/ml", str(tmp_path / "job-1")) for key, value in FACTS["folders"].items()}
    assert variables["SM_MODEL_DIR"] == folders["model_dir"] and variables["SM_INPUT_DIR"] == folders["input_dir"]
    assert variables["SM_OUTPUT_DATA_DIR"] == folders["output_data_dir"]
    assert [str(folder) for _, folder in fetched] == [  # channel_path: <input data folder>/<channel>
        f"{folders['_input_data_dir']}/code",
        f"{folders['_input_data_dir']}/data-train",
    ]
    assert variables["SM_CHANNEL_DATA-TRAIN"] == f"{folders['_input_data_dir']}/data-train"
    assert variables["SM_HPS"] == '{"a":"x","epochs":"3"}'  # the toolkit's json.dumps(sort_keys, compact)


def test_a_code_folder_shipped_again_holds_one_copy_of_the_package_and_its_metadata(tmp_path):
    from nbtoolkit.backends.sagemaker.code import ship_package

    code = tmp_path / "code"
    (code / "nbtoolkit_finetune-0.0.9.dist-info").mkdir(parents=True)  # an earlier version's, fewer backends
    (code / "nbtoolkit" / "gone.py").parent.mkdir()
    (code / "nbtoolkit" / "gone.py").write_text("")  # a module that version had
    ship_package(code)
    infos = sorted(path.name for path in code.glob("*.dist-info"))
    assert len(infos) == 1 and infos[0] != "nbtoolkit_finetune-0.0.9.dist-info"
    assert "sagemaker" in (code / infos[0] / "entry_points.txt").read_text()
    assert not (code / "nbtoolkit" / "gone.py").exists() and (code / "nbtoolkit" / "spec.py").is_file()
