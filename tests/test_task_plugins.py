"""A task from another distribution: registered by an entry point alone, it is a task of the spec and the form, trains
as a job and answers with its own function, like nbtoolkit's own; a broken one, one missing a fact and one that takes
a name already registered are each named in one sentence and left out."""

from __future__ import annotations

import json

from tests.test_backend_plugins import plugin, run

#: a poem task: causal-lm's data, model and training, its own answering function
DESCRIPTOR = '''
"""Poems: texts continued, answered as a poem."""
from dataclasses import replace

from nbtoolkit.tasks.causal_lm import TASK as CAUSAL_LM

TASK = replace(CAUSAL_LM, name="poem", prompt="the first line of a poem", answer="poems_nbtoolkit.answer:verse",
               sample_data="causal-lm", listed=5000)
NO_PROMPT = replace(TASK, name="unprompted", prompt="")
TWICE = replace(TASK, name="chat")
'''

ANSWER = """
from nbtoolkit.tasks.causal_lm.answer import continue_text


def verse(spec, model, tokenizer, text):
    return {"verse": text + continue_text(spec, model, tokenizer, text)["continuation"]}
"""


def test_a_task_registered_only_by_its_entry_point_trains_and_answers_and_broken_ones_are_left_out(tmp_path, home):
    root = tmp_path / "site"
    entries = "\n".join(
        [
            "poem = poems_nbtoolkit:TASK",
            "unprompted = poems_nbtoolkit:NO_PROMPT",
            "chat = poems_nbtoolkit:TWICE",
            "broken = poems_nbtoolkit.missing:TASK",
        ]
    )
    files = {"poems_nbtoolkit/__init__.py": DESCRIPTOR, "poems_nbtoolkit/answer.py": ANSWER}
    plugin(root, "poems_nbtoolkit", entries, files, group="nbtoolkit.tasks")
    done = run(
        """
        import json, warnings
        warnings.simplefilter("always")
        from nbtoolkit.api import launch
        from nbtoolkit.notebook.spec_fields import choices
        from nbtoolkit.tasks import TASK_NAMES, TASKS

        job = launch({"name": "poems", "task": "poem", "train": {"max_steps": 2, "eval_steps": 2}})
        found = {"names": TASK_NAMES, "form": list(choices("task")), "status": job.wait(timeout=240),
                 "chat": TASKS["chat"].answer}
        found["answer"] = job.predict("Roses are red")
        print(json.dumps(found))
    """,
        root,
        home,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["names"][-1] == "poem" and found["form"] == found["names"]
    assert "unprompted" not in found["names"] and "broken" not in found["names"]
    assert found["status"] == "succeeded"
    assert found["answer"]["verse"].startswith("Roses are red")
    assert found["chat"] == "nbtoolkit.tasks.chat.answer:reply"  # nbtoolkit's own chat, not the plugin's
    warned = done.stderr
    assert (
        "task 'unprompted' has no prompt (what the Try-it box asks for); add it where the task is defined; until then "
        "it is left out" in warned
    )
    assert (
        "task 'chat' (poems_nbtoolkit:TWICE) is left out: nbtoolkit.tasks.chat:TASK registers a task of that name "
        "already; rename one of them" in warned
    )
    assert "task 'broken' (poems_nbtoolkit.missing:TASK) could not be loaded and is left out: No module named" in warned


def test_an_install_whose_metadata_predates_the_task_group_says_to_install_again(tmp_path, home):
    """nbtoolkit's own tasks reach the registry through its installed entry points: an older install's have none."""
    root = tmp_path / "site"
    root.mkdir()
    plugin(root, "nbtoolkit_finetune", "local = nbtoolkit.backends.local:backend", {})  # shadows the installed one
    done = run("import nbtoolkit.spec", root, home)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "nbtoolkit.tasks.TaskError: no task is registered in the entry-point group nbtoolkit.tasks: nbtoolkit's "
        "installed metadata is older than its source; install it again (make install, or pip install -e . in its "
        "checkout)"
    )


#: the two tasks added last, each by its folder, its tests, its docs page and its entry point alone
LEAVES = {"vision-chat": "nbtoolkit.tasks.vision_chat", "reward-model": "nbtoolkit.tasks.reward_model"}


def test_a_task_left_out_of_the_entry_points_with_its_folder_gone_leaves_the_others_whole(tmp_path, home):
    """Removable as it was addable: nbtoolkit's own metadata without the vision-chat and reward-model entry points
    (its distribution shadowed), and their folders unimportable; the core still imports, the spec and the form offer
    the other seven, and a chat spec validates and plans with the shared tiny models. No training."""
    from importlib.metadata import distribution

    root = tmp_path / "site"
    root.mkdir()
    own = distribution("nbtoolkit-finetune").read_text("entry_points.txt") or ""
    kept = [line for line in own.splitlines() if line.split("=")[0].strip() not in LEAVES]
    assert len(kept) == len(own.splitlines()) - 2
    (info := root / "nbtoolkit_finetune-1.0.dist-info").mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nbtoolkit_finetune\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("\n".join(kept) + "\n")
    done = run(
        f"""
        import importlib.abc, json, sys, warnings
        warnings.simplefilter("error")  # a task left out is no warning: it is simply not registered

        class Gone(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.startswith({tuple(LEAVES.values())!r}):
                    raise ModuleNotFoundError(f"{{name}} is removed")

        sys.meta_path.insert(0, Gone())
        import nbtoolkit.api, nbtoolkit.cli, nbtoolkit.notebook.form, nbtoolkit.server
        from nbtoolkit.inputs.bundled import TINY_MODELS
        from nbtoolkit.notebook.form import SpecForm
        from nbtoolkit.notebook.spec_fields import choices
        from nbtoolkit.planner import plan
        from nbtoolkit.spec import RunSpec, SpecError, load_spec
        from nbtoolkit.tasks import TASK_NAMES

        try:
            load_spec({{"task": "vision-chat"}})
        except SpecError as exc:
            refused = str(exc)
        chat = plan({{"task": "chat", "hardware": {{"instance_type": "g5.2xlarge"}}}})
        found = {{
            "names": TASK_NAMES,
            "form": list(choices("task")),
            "schema": RunSpec.model_json_schema()["properties"]["task"]["enum"],
            "form_widget": [value for _, value in SpecForm().fields["task"].options],
            "tiny": sorted(TINY_MODELS),
            "refused": refused,
            "fits": chat.fits,
            "gone": sorted(name for name in sys.modules if name.startswith({tuple(LEAVES.values())!r})),
        }}
        print(json.dumps(found))
    """,
        root,
        home,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    others = [
        "text-classification",
        "summarization",
        "question-answering",
        "causal-lm",
        "chat",
        "preference",
        "grpo",
    ]
    assert found["names"] == found["form"] == found["schema"] == found["form_widget"] == others
    assert "nbtoolkit/tiny-vlm" not in found["tiny"] and "nbtoolkit/tiny-chat" in found["tiny"]
    assert found["refused"].startswith("task: 'vision-chat' is not valid; expected 'text-classification'")
    assert found["fits"] is True and found["gone"] == []


#: the poem task, and two that state a fact wrongly: a spec block there is none of, a dataset field there is none of
WRONG = f"""{DESCRIPTOR}
ASTRAY = replace(TASK, name="astray", block="nonexistent")
TAGGED = replace(TASK, name="tagged", columns={{"tags_column": "tags"}})
"""


def test_a_plugin_with_a_wrong_block_breaks_no_other_spec_and_a_plugin_task_is_refused_where_nbtoolkit_goes_alone(
    tmp_path, home
):
    """A block no spec has broke every spec of every task; a dataset field none has broke the task's preview with a
    traceback; a plugin task rendered for SageMaker or SkyPilot ran in a container without it. No training."""
    root = tmp_path / "site"
    entries = "poem = poems_nbtoolkit:TASK\nastray = poems_nbtoolkit:ASTRAY\ntagged = poems_nbtoolkit:TAGGED"
    files = {"poems_nbtoolkit/__init__.py": WRONG, "poems_nbtoolkit/answer.py": ANSWER}
    plugin(root, "poems_nbtoolkit", entries, files, group="nbtoolkit.tasks")
    done = run(
        """
        import json, warnings
        warnings.simplefilter("ignore")
        from nbtoolkit.spec import SpecError, load_spec
        from nbtoolkit.tasks import TASK_NAMES

        def refusal(spec):
            try:
                load_spec(spec)
            except SpecError as exc:
                return str(exc)

        cuda = {"accelerator": "cuda"}
        sagemaker = {"hardware": {**cuda, "target": "sagemaker", "instance_type": "ml.g5.2xlarge"},
                     "sagemaker": {"role": "arn:aws:iam::123456789012:role/trainer"}}
        skypilot = {"hardware": {**cuda, "target": "skypilot", "instance_type": "g5.2xlarge"}}
        found = {"names": TASK_NAMES, "chat": refusal({"task": "chat"}), "poem": refusal({"task": "poem"}),
                 "tagged": refusal({"task": "tagged"}), "poem-sagemaker": refusal({"task": "poem", **sagemaker}),
                 "chat-sagemaker": refusal({"task": "chat", **sagemaker}),
                 "poem-skypilot": refusal({"task": "poem", **skypilot})}
        print(json.dumps(found))
    """,
        root,
        home,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert "astray" not in found["names"] and "poem" in found["names"]
    assert found["chat"] is None and found["poem"] is None and found["chat-sagemaker"] is None
    assert found["tagged"] == (
        "task 'tagged' cannot be used: it names dataset.tags_column, a field the spec's dataset block does not have; "
        "its package must name the block's own fields (the columns: text_column, text_pair_column, label_column, "
        "question_column, context_column, answer_column, summary_column)"
    )
    for target in ("sagemaker", "skypilot"):
        assert found[f"poem-{target}"] == (
            f"task 'poem' comes from the distribution poems_nbtoolkit, which a {target} job does not carry (it has "
            "nbtoolkit alone); train it on hardware.target local or slurm, which run in this environment, where it is "
            "installed"
        )
