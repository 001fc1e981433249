"""The "Try it" box under a finished job: type an input, read the trained model's answer in the task's terms.

The answer comes from `Job.predict` (the job's model in a process of its own, kept loaded between messages: the
kernel imports no torch), or for a chat from the job's running server (`nbtoolkit serve`: `server_url`), shown as a label with its probabilities, a summary, an answer span with its score, or a
continuation.
"""

from __future__ import annotations

import html
import tempfile
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from nbtoolkit.backends import LaunchError
from nbtoolkit.notebook.data_view import bars
from nbtoolkit.tasks import TASKS
from nbtoolkit.trained_model.serve import chat_reply

ERROR_COLOR = "var(--jp-error-color1, #d32f2f)"
CHOSEN_COLOR = "var(--jp-success-color1, #388e3c)"


class TryIt(widgets.VBox):
    """A text box (QA: a question and a context), a Try it button, and the model's last answer."""

    def __init__(self, job, checkpoint: str | None = None, server_url: str | None = None) -> None:
        self.job, self.checkpoint, self.server_url = job, checkpoint, server_url
        self.task = job.spec.task
        layout = widgets.Layout(width="95%")
        self.question = widgets.Text(placeholder="a question about the context", description="Question", layout=layout)
        self.text = widgets.Textarea(
            placeholder=TASKS[self.task].prompt,
            description="Context" if self.is_qa else "Input",
            layout=widgets.Layout(width="95%", height="6em"),
        )
        self.button = widgets.Button(description="Try it", icon="play", button_style="primary")
        self.answer = widgets.HTML()
        self.last: dict[str, Any] | None = None
        self.button.on_click(lambda _: self.ask())
        #: chat, preference and grpo models chat: the conversation so far goes with every message
        self.history: list[dict[str, str]] = []
        self.new_chat = widgets.Button(description="New chat", icon="refresh")
        self.new_chat.on_click(lambda _: self.restart())
        #: a vision-language model's: an image to send with the next message (saved to a file the model's process reads)
        self.image = widgets.FileUpload(accept="image/*", multiple=False, description="Image")
        buttons = widgets.HBox([self.button, self.new_chat]) if self.is_chat else self.button
        if self.takes_images:
            buttons = widgets.HBox([self.image, self.button, self.new_chat])
        model = f"checkpoint {checkpoint}" if checkpoint else "the final model"
        if server_url:
            model = f"the server at {server_url}, serving the final model"
        heading = widgets.HTML(f"<b>Try it</b>: {html.escape(model)} of job {html.escape(job.id)}")
        super().__init__([heading, *([self.question] if self.is_qa else []), self.text, buttons, self.answer])
        self.add_class("nbtoolkit-try-it")

    @property
    def is_chat(self) -> bool:
        return TASKS[self.task].try_it in ("chat", "chat-with-images")

    @property
    def takes_images(self) -> bool:
        return TASKS[self.task].try_it == "chat-with-images"

    def message(self, text: str) -> str | list[dict[str, str]]:
        """The user's message: the text, or with an uploaded image its parts (the image saved where the model's
        process reads it); the upload is cleared once sent."""
        if not (self.takes_images and self.image.value):
            return text
        upload = self.image.value[0]
        folder = Path(tempfile.mkdtemp(prefix=f"nbtoolkit-try-it-{self.job.id}-"))
        path = folder / Path(upload["name"]).name
        path.write_bytes(bytes(upload["content"]))
        self.image.value = ()
        return [{"type": "image", "image": str(path)}, {"type": "text", "text": text}]

    def restart(self) -> None:
        """Forget the conversation (the model keeps none: each message sends the history so far)."""
        self.history = []
        self.answer.value = ""

    @property
    def is_qa(self) -> bool:
        return TASKS[self.task].try_it == "question-and-context"

    def inputs(self) -> str | dict[str, str]:
        text = self.text.value.strip()
        return {"question": self.question.value.strip(), "context": text} if self.is_qa else text

    def ask(self) -> dict[str, Any] | None:
        """The button's handler: the model's answer to the box's input, shown below it."""
        given = self.inputs()
        if not all(given.values() if isinstance(given, dict) else [given]):
            self.answer.value = say("type a question and a context first" if self.is_qa else "type a text first")
            return None
        self.button.disabled = True
        asked = [*self.history, {"role": "user", "content": self.message(given)}] if self.is_chat else given
        self.answer.value = (chat_html(asked) if self.is_chat else "") + "<i>the model is answering ...</i>"
        try:
            self.last = (
                chat_reply(self.server_url, asked)
                if self.server_url
                else self.job.predict(asked, checkpoint=self.checkpoint)
            )
        except LaunchError as exc:
            self.answer.value = say(str(exc))
            return None
        finally:
            self.button.disabled = False
        if self.is_chat:
            self.history = [*asked, {"role": "assistant", "content": self.last["reply"]}]
            self.text.value = ""
            self.answer.value = chat_html(self.history)
        else:
            self.answer.value = answer_html(given, self.last)
        return self.last


def answer_html(given: str | dict[str, str], answer: dict[str, Any]) -> str:
    """The answer as the task's answering function shaped it (nbtoolkit.train.inference)."""
    if "label" in answer:
        rows = [
            (label, probability, label == answer["label"])
            for label, probability in sorted(answer["probabilities"].items(), key=lambda item: -item[1])
        ]
        return f"<p>label: <b>{html.escape(answer['label'])}</b></p>" + bars(
            rows, shown=lambda probability: f"{probability:.1%}", mark="", mark_color=CHOSEN_COLOR
        )
    if "summary" in answer:
        return f"<p>summary: <b>{html.escape(answer['summary'])}</b></p>"
    if "answer" in answer:
        return f"<p>answer: <b>{html.escape(answer['answer']) or '(none)'}</b> (score {answer['score']:.3f})</p>"
    if "score" in answer:  # a reward model's: higher is a reply it prefers
        return f"<p>score: <b>{answer['score']:.3f}</b> (the reward model's; higher is a reply it prefers)</p>"
    return f"<p>{html.escape(given)}<b>{html.escape(answer['continuation'])}</b></p>"


def chat_html(messages: list[dict[str, Any]]) -> str:
    """The conversation as alternating turns, the model's on the right (an image a message carried: its name)."""
    styles = {
        "user": ("you", "text-align: left"),
        "assistant": ("model", "text-align: right; color: var(--jp-brand-color1, #1976d2)"),
    }
    turns = []
    for message in messages:
        who, style = styles.get(message["role"], (message["role"], "color: gray"))
        content = message["content"]
        if isinstance(content, list):  # text and image parts
            content = " ".join(
                f"[image {Path(part['image']).name}]" if part["type"] == "image" else part["text"] for part in content
            )
        text = html.escape(content) or "<i>(empty reply)</i>"
        turns.append(f"<p class='nbtoolkit-chat-{who}' style='{style}'><b>{who}:</b> {text}</p>")
    return "".join(turns)


def say(text: str) -> str:
    return f"<p style='color: {ERROR_COLOR}'>{html.escape(text)}</p>"
