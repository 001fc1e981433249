"""vision-chat: the bundled tiny vision-language model with LoRA on 2 ranks (torchrun, gloo), one job several tests
read (it trains, charts, answers about an image), and the vision data formats without a job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.inputs.chat_formats import FormatError
from nbtoolkit.runner import JobStore
from nbtoolkit.tasks.vision_chat import ASSETS as VISION_CHAT_ASSETS
from nbtoolkit.tasks.vision_chat.formats import as_vision_row, detect_vision_format

pytestmark = pytest.mark.heavy  # a real 2-rank training job: run first under pytest -n (tests/conftest.py)

SAMPLE = VISION_CHAT_ASSETS / "data"
STEPS = 4
SPEC = {
    "task": "vision-chat",
    "adapter": {"r": 8},
    "hardware": {"devices": 2},
    "parallelism": {"strategy": "ddp"},
    "train": {"max_steps": STEPS, "batch_size": 4, "logging_steps": 1, "learning_rate": 1.0e-2},
}


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Job:
    home = tmp_path_factory.mktemp("nbhome")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        started = launch(SPEC, store=JobStore(home))
    started.wait(timeout=400)
    assert started.record.status == "succeeded", started.logs(tail=40)
    return started


def test_trains_on_two_ranks_and_charts_its_loss(job):
    from nbtoolkit.notebook.charts import ChartFigure

    records = job.records()
    train = [record for record in records if record["kind"] == "train"]
    assert [record["step"] for record in train] == list(range(1, STEPS + 1))
    assert train[-1]["loss"] < train[0]["loss"], [record["loss"] for record in train]
    assert any("eval_loss" in record for record in records)
    logs = job.logs()
    assert "2 process(es)" in logs and "dataset format: messages, messages with image parts" in logs
    assert ChartFigure().draw(records, job.record.name).startswith(b"\x89PNG")


def test_the_adapter_is_on_the_language_model_alone(job):
    from safetensors.torch import load_file

    saved = load_file(job.dir / "output" / "model" / "adapter_model.safetensors")
    assert saved and all("language_model" in name and "lora_" in name for name in saved), sorted(saved)[:4]
    assert json.loads((job.dir / "output" / "model" / "processor_config.json").read_text())["image_seq_length"] == 4


def test_predict_answers_about_an_image(job, monkeypatch):
    monkeypatch.chdir(SAMPLE)  # the image path is relative to where predict is called
    answer = job.predict({"text": "What shape is this?", "image": "images/red-circle.png"})
    assert isinstance(answer["reply"], str)
    assert (
        answer["prompt"] == "<|im_start|>user\n<start_of_image>What shape is this?<|im_end|>\n<|im_start|>assistant\n"
    )
    conversation = [
        {
            "role": "user",
            "content": [{"type": "image", "image": "images/blue-square.png"}, {"type": "text", "text": "Hi"}],
        }
    ]
    assert job.predict(conversation)["prompt"].count("<start_of_image>") == 1
    with pytest.raises(LaunchError, match=r"^vision-chat inputs are a text, \{'text': \.\.\., 'image': path\}"):
        job.predict({"image": "images/red-circle.png"})
    with pytest.raises(LaunchError, match=r"^the image nowhere\.png does not exist"):
        job.predict({"text": "What shape is this?", "image": "nowhere.png"})


def test_try_it_sends_an_uploaded_image_with_the_message(job):
    from datetime import datetime, timezone

    from nbtoolkit.notebook.try_it import TryIt

    chat = TryIt(job)
    assert chat.image in chat.children[-2].children  # the upload beside the buttons
    png = (SAMPLE / "images" / "red-circle.png").read_bytes()
    chat.image.value = (
        {
            "name": "red-circle.png",
            "type": "image/png",
            "size": len(png),
            "content": memoryview(png),
            "last_modified": datetime.now(timezone.utc),
        },
    )
    chat.text.value = "What shape is this?"
    answer = chat.ask()
    assert answer is not None and answer["prompt"].count("<start_of_image>") == 1
    sent = chat.history[0]["content"]
    assert sent[0]["type"] == "image" and Path(sent[0]["image"]).read_bytes() == png
    assert chat.image.value == () and "[image red-circle.png] What shape is this?" in chat.answer.value
    chat.text.value = "And its colour?"  # the next message carries no new image; the first stays in the history
    assert chat.ask()["prompt"].count("<start_of_image>") == 1


def test_the_preview_shows_each_image_beside_its_text_and_loss_tokens():
    import base64
    import io

    from PIL import Image

    from nbtoolkit.inputs.data_preview import preview_data

    report = preview_data({"task": "vision-chat"})
    assert report.data_format.startswith("messages, messages with image parts")
    assert report.format_columns == ["messages", "images"]
    first = report.rendered[0]
    assert [text for text, loss in first.pieces if loss] == ["A square.<|im_end|>"]  # the reply alone carries loss
    assert "<image_soft_token>" * 4 in first.marked()
    shown = Image.open(io.BytesIO(base64.b64decode(first.images[0])))
    assert shown.size == (48, 48) and shown.getpixel((24, 24)) == (40, 160, 70)  # green-square.png, row 1's
    page = report._repr_html_()
    assert page.count("<img src='data:image/png;base64,") == len(report.rendered) == 5
    llava = preview_data({"task": "vision-chat", "dataset": {"files": {"train": str(SAMPLE / "llava-train.json")}}})
    assert llava.data_format.startswith("sharegpt, sharegpt conversations with <image>") and llava.sample_size == 32


# -- formats, without a job --------------------------------------------------------------------------


def test_auto_detects_trl_and_llava_and_refuses_text_only_chat():
    assert detect_vision_format(["messages", "images"]) == "messages"
    assert detect_vision_format(["id", "image", "conversations"]) == "sharegpt"
    with pytest.raises(FormatError, match=r"no vision chat format .* columns are messages\);"):
        detect_vision_format(["messages"])
    with pytest.raises(
        FormatError, match=r"^dataset.format 'alpaca' is no vision chat format; use messages or sharegpt or auto"
    ):
        detect_vision_format(["messages", "images"], "alpaca")
    with pytest.raises(FormatError, match=r"'sharegpt' needs the column\(s\) image, but the data has conversations"):
        detect_vision_format(["conversations"], "sharegpt")


def test_bundled_llava_rows_become_trl_rows_with_absolute_images():
    rows = json.loads((SAMPLE / "llava-train.json").read_text())
    converted = [as_vision_row(row, "sharegpt", SAMPLE, number) for number, row in enumerate(rows, 1)]
    first = converted[0]
    assert first["messages"][0]["role"] == "user" and first["messages"][1]["role"] == "assistant"
    assert first["messages"][0]["content"][0] == {"type": "image", "text": None}
    assert first["messages"][0]["content"][1]["text"] == rows[0]["conversations"][0]["value"].removeprefix("<image>\n")
    assert all(Path(row["images"][0]).is_file() and Path(row["images"][0]).is_absolute() for row in converted)


def test_images_and_places_must_match_and_text_only_turns_get_the_image_first():
    row = {"messages": [{"role": "user", "content": "What is it?"}, {"role": "assistant", "content": "A dog."}]}
    placed = as_vision_row({**row, "images": ["a.png"]}, "messages", Path("/data"))
    assert placed["messages"][0]["content"] == [
        {"type": "image", "text": None},
        {"type": "text", "text": "What is it?"},
    ]
    assert placed["images"] == ["/data/a.png"]
    two_places = {"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Same?"}]}
    with pytest.raises(FormatError, match=r"^row 3 has 2 image place\(s\) in its turns but 1 image\(s\) in its images"):
        as_vision_row({"messages": [two_places], "images": ["a.png"]}, "messages", None, 3)


def test_a_chat_template_of_the_spec_is_refused_not_ignored():
    from nbtoolkit.spec import SpecError, load_spec

    with pytest.raises(SpecError, match=r"task vision-chat renders conversations with the model's processor"):
        load_spec({"task": "vision-chat", "dataset": {"chat_template": "chatml"}})


def test_a_data_file_naming_a_missing_image_or_too_few_images_is_refused_before_launch(tmp_path):
    """The pre-launch check reads every row as the job will (the task's check_row): the bundled files pass, a row
    whose image is not there or whose places and images differ is one sentence naming the file and row, no job."""
    import shutil

    from nbtoolkit.inputs.preflight import input_problems
    from nbtoolkit.spec import load_spec

    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    llava = {"train": str(data / "llava-train.json"), "validation": str(data / "llava-validation.json")}
    assert input_problems(load_spec({"task": "vision-chat", "dataset": {"files": llava}})) == []
    files = {"train": str(data / "train.jsonl"), "validation": str(data / "validation.jsonl")}
    spec = {"task": "vision-chat", "dataset": {"files": files}}
    assert input_problems(load_spec(spec)) == []
    rows = (data / "train.jsonl").read_text().splitlines()
    (data / "images" / json.loads(rows[1])["images"][0].removeprefix("images/")).unlink()
    with pytest.raises(
        LaunchError, match=r"dataset.files.train \(.*train.jsonl\): row 2 names .*images/.*\.png, which does not exist"
    ):
        launch(spec, store=JobStore(tmp_path / "home"))
    assert not list((tmp_path / "home").glob("jobs/*"))  # nothing started
    second = json.loads(rows[1])
    (data / "train.jsonl").write_text("\n".join([rows[0], json.dumps({**second, "images": []}), *rows[2:]]) + "\n")
    problem = (
        f"dataset.files.train ({files['train']}): row 2 has 1 image place(s) in its turns but 0 image(s) in its "
        "images column; give one image per place"
    )
    assert input_problems(load_spec(spec)) == [problem]


def one_row_file(folder: Path, image: str, reply: str = "A circle.") -> dict[str, str]:
    """dataset.files with one TRL vision row naming `image` (relative to the file)."""
    row = {
        "messages": [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape?"}]},
            {"role": "assistant", "content": reply},
        ],
        "images": [image],
    }
    (folder / "train.jsonl").write_text(json.dumps(row) + "\n")
    return {"train": str(folder / "train.jsonl")}


def test_an_image_that_does_not_open_is_one_sentence_before_launch(tmp_path, monkeypatch):
    """A truncated PNG, a text file named .png and an image over PIL's decompression-bomb limit failed the job as
    datasets decoded them; the pre-launch check opens each (PIL's verify) and names the row, file and fault."""
    from PIL import Image

    from nbtoolkit.inputs.preflight import input_problems
    from nbtoolkit.spec import load_spec

    Image.new("RGB", (28, 28), "red").save(tmp_path / "good.png")
    whole = (tmp_path / "good.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(whole[: len(whole) - 20])
    (tmp_path / "text.png").write_text("not a picture at all")
    spec = {"task": "vision-chat", "dataset": {"eval_split": None}}

    def problems(image: str) -> list[str]:
        return input_problems(
            load_spec({**spec, "dataset": {"eval_split": None, "files": one_row_file(tmp_path, image)}})
        )

    def refusal(image: str, reason: str) -> list[str]:
        where = f"dataset.files.train ({tmp_path / 'train.jsonl'}): row 1 names {tmp_path / image}"
        return [f"{where}, which {reason}; replace the file or remove the row"]

    assert problems("good.png") == []
    assert problems("cut.png") == refusal("cut.png", "is a damaged image (Truncated File Read)")
    unread = "is not an image PIL can read (it may be another kind of file named as an image)"
    assert problems("text.png") == refusal("text.png", unread)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 28x28 = 784 pixels, past twice 100
    (tmp_path / "big.png").write_bytes(whole)
    bomb = "is larger than PIL's decompression-bomb limit of 200 pixels (the job would refuse to decode it)"
    assert problems("big.png") == refusal("big.png", bomb)


def test_a_max_length_that_cuts_the_image_tokens_or_every_reply_is_refused_before_launch():
    """TRL cuts each row at dataset.max_length with the image's tokens inside: a cut through them failed the job at
    step 1, a cut before every reply succeeded with a loss of 0. The bundled rows (4 image tokens each, image
    tokens ending at token 10, prompts of up to 31 tokens) are rendered as TRL's collator renders them."""
    from nbtoolkit.inputs.preflight import input_findings
    from nbtoolkit.spec import load_spec

    def findings(max_length: int, **spec) -> tuple[list[str], list[str]]:
        return input_findings(load_spec({"task": "vision-chat", "dataset": {"max_length": max_length}, **spec}))

    refused, _ = findings(8)
    assert len(refused) == 1 and refused[0].startswith("dataset.max_length 8 cuts through the image tokens of row 1")
    assert refused[0].endswith(
        "(its images end at token 10), which fails the job at its first step (the model counts "
        "fewer image tokens than images); raise dataset.max_length above 10"
    )
    refused, _ = findings(12)
    assert len(refused) == 1 and refused[0].startswith("all 64 rows of dataset.files.train")
    assert "lose every assistant turn at dataset.max_length 12" in refused[0] and "so nothing trains" in refused[0]
    refused, warned = findings(30)
    assert (
        refused == [] and len(warned) == 1 and "and they train nothing; raise dataset.max_length above 31" in warned[0]
    )
    assert findings(32) == ([], [])
    # a hub model the planner knows, data read elsewhere: its 256 tokens per image from its config
    sagemaker = {"role": "arn:aws:iam::111122223333:role/R", "region": "us-east-1", "bucket": "b"}
    remote = {"model": "google/gemma-3-4b-it", "hardware": {"target": "sagemaker", "instance_type": "ml.g5.2xlarge"}}
    refused, _ = findings(128, **remote, sagemaker=sagemaker)
    assert refused == [
        (
            "dataset.max_length 128 cannot hold one image: model google/gemma-3-4b-it turns each image into 256 tokens, "
            "which fails the job at its first step (the model counts fewer image tokens than images); raise "
            "dataset.max_length well above 256"
        )
    ]


def test_a_file_mixing_formats_an_image_in_a_reply_and_packing_are_refused_before_launch(tmp_path):
    """The job reads a whole file in one format (the first its columns hold), so a sharegpt row in a messages file
    was a null there; an image part in an assistant turn failed the processor at step 1; TRL refuses packing with
    images: each one sentence before launch."""
    from PIL import Image

    from nbtoolkit.inputs.preflight import input_problems
    from nbtoolkit.spec import SpecError, load_spec

    Image.new("RGB", (28, 28), "red").save(tmp_path / "red.png")
    files = one_row_file(tmp_path, "red.png")
    llava = {
        "conversations": [{"from": "human", "value": "<image>What?"}, {"from": "gpt", "value": "Red."}],
        "image": "red.png",
    }
    with open(files["train"], "a") as data:
        data.write(json.dumps(llava) + "\n")
    spec = {"task": "vision-chat", "dataset": {"files": files, "eval_split": None}}
    assert input_problems(load_spec(spec)) == [
        (
            f"dataset.files.train ({files['train']}): row 2 is in the sharegpt format but the file is read in the messages "
            "format (the job reads every row of a file in one format: the first of messages, sharegpt it has a column "
            "for); give every row in one format, or split the file"
        )
    ]
    (tmp_path / "train.jsonl").write_text(json.dumps(llava) + "\n")
    assert input_problems(load_spec(spec)) == []
    reply = {"from": "gpt", "value": "<image>Red."}
    (tmp_path / "train.jsonl").write_text(json.dumps({**llava, "conversations": [llava["conversations"][0], reply]}))
    assert input_problems(load_spec(spec)) == [
        (
            f"dataset.files.train ({files['train']}): row 1's conversations, turn 2 is the assistant's and holds an "
            "image; put images in the user's turns"
        )
    ]
    with pytest.raises(SpecError, match=r"extra.packing: true is not supported by TRL for conversations with images"):
        load_spec({"task": "vision-chat", "extra": {"packing": True}})


def test_images_a_remote_job_would_not_receive_are_refused_at_render(tmp_path):
    """SageMaker and SkyPilot ship the data file alone: a vision row's image on this machine failed the job after its
    paid machine started. One sentence names the row and the image, and says what to do."""
    from PIL import Image

    from nbtoolkit.backends.dispatch import render
    from nbtoolkit.spec import SpecError, load_spec

    Image.new("RGB", (28, 28), "red").save(tmp_path / "red.png")
    dataset = {"files": one_row_file(tmp_path, "red.png"), "eval_split": None}
    unshipped = (
        rf"dataset.files.train \(.*train.jsonl\): row 1 names {tmp_path}/red.png, a file on this machine that a "
        r"{} job does not receive \(only the data files are shipped\); push the dataset with its images to the "
        r"Hugging Face Hub"
    )
    sagemaker = {"role": "arn:aws:iam::111122223333:role/R", "region": "us-east-1", "bucket": "b"}
    hardware = {"target": "sagemaker", "instance_type": "ml.g5.2xlarge"}
    with pytest.raises(SpecError, match=unshipped.format("SageMaker")):
        render(load_spec({"task": "vision-chat", "dataset": dataset, "hardware": hardware, "sagemaker": sagemaker}))
    skypilot = {"hardware": {"target": "skypilot", "accelerator": "cuda"}, "skypilot": {"accelerators": "A10G:1"}}
    with pytest.raises(LaunchError, match=unshipped.format("SkyPilot")):
        render(load_spec({"task": "vision-chat", "dataset": dataset, **skypilot}))
