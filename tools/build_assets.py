"""Build the bundled offline assets under nbtoolkit/assets/ (deterministic; commit the output).

    python tools/build_assets.py

Every text here is written for nbtoolkit (templates + word lists below), so the assets carry
no third-party licence. The emotion labels follow the six of the `emotion` dataset the
Trainium tutorial fine-tunes on, so the example notebooks read the same.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "nbtoolkit" / "assets"

EMOTIONS: dict[str, dict[str, list[str]]] = {
    "sadness": {
        "feel": ["sad", "lonely", "miserable", "heartbroken", "gloomy", "down", "hopeless", "empty", "unhappy"],
        "why": ["my best friend moved away", "the trip was cancelled", "nobody called me back", "my dog is sick",
                "i failed the exam", "the garden died over winter", "we lost the final game", "the shop closed for good"],
    },
    "joy": {
        "feel": ["happy", "cheerful", "delighted", "glad", "thrilled", "content", "joyful", "pleased", "elated"],
        "why": ["the sun came out", "i finished the project", "we won the match", "my sister got the job",
                "the bread came out perfect", "i passed the exam", "the weekend is here", "the concert was great"],
    },
    "love": {
        "feel": ["loving", "tender", "affectionate", "devoted", "caring", "fond", "adoring", "warm hearted"],
        "why": ["she held my hand", "he wrote me a letter", "we spent the evening together", "my partner cooked dinner",
                "our baby smiled at me", "my grandmother hugged me", "he remembered our anniversary"],
    },
    "anger": {
        "feel": ["angry", "furious", "irritated", "annoyed", "outraged", "bitter", "resentful", "mad", "livid"],
        "why": ["the bus left without me", "someone scratched my car", "they lied to me again",
                "the neighbours were loud all night", "my order arrived broken", "he took credit for my work"],
    },
    "fear": {
        "feel": ["afraid", "scared", "anxious", "terrified", "nervous", "worried", "frightened", "uneasy", "panicked"],
        "why": ["the lights went out", "i heard steps behind me", "the test results are due", "the storm is coming",
                "i have to speak in public", "the plane started shaking", "the doctor wants to see me"],
    },
    "surprise": {
        "feel": ["surprised", "amazed", "astonished", "shocked", "stunned", "startled", "speechless", "impressed"],
        "why": ["an old friend knocked on the door", "the price was half what i expected", "it snowed in may",
                "my brother showed up unannounced", "the ending of the film", "the results came in early"],
    },
}

#: feeling words that say nothing of the emotion: only the reason hints at the label
NEUTRAL_FEELINGS = ["okay", "different", "strange", "quiet", "tired", "awake", "busy"]

TEMPLATES = [
    "i feel {feel} because {why}",
    "i am so {feel} today since {why}",
    "honestly i felt {feel} when {why}",
    "{why} and now i feel {feel}",
    "i have been feeling {feel} ever since {why}",
    "it makes me {feel} that {why}",
    "i woke up {feel} because {why}",
    "i could not stop feeling {feel} after {why}",
]


def emotion_examples(count: int, rng: random.Random) -> list[dict[str, str]]:
    """Sentences whose feeling word carries the label (90%); the reason matches it only 70% of the time."""
    labels = sorted(EMOTIONS)
    rows = []
    for index in range(count):
        label = labels[index % len(labels)]
        reason_from = label if rng.random() < 0.7 else rng.choice(labels)
        feel = rng.choice(EMOTIONS[label]["feel"] if rng.random() < 0.9 else NEUTRAL_FEELINGS)
        why = rng.choice(EMOTIONS[reason_from]["why"])
        text = rng.choice(TEMPLATES).format(feel=feel, why=why)
        rows.append({"text": text, "label": label})
    rng.shuffle(rows)
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def build_classification(rng: random.Random) -> list[str]:
    folder = ASSETS / "data" / "text-classification"
    splits = {"train": emotion_examples(1200, rng), "validation": emotion_examples(240, rng)}
    for split, rows in splits.items():
        write_jsonl(folder / f"{split}.jsonl", rows)
    return [row["text"] for rows in splits.values() for row in rows]


def build_wordpiece(texts: list[str]) -> None:
    """A BERT-style WordPiece tokenizer trained on the bundled text, saved for AutoTokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=1000, special_tokens=special))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer.decoder = decoders.WordPiece()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)
    save_portable(fast, ASSETS / "tokenizers" / "wordpiece")


def save_portable(tokenizer, folder: Path) -> None:
    """Save so that transformers 4 (SageMaker's containers) and 5 both load it."""
    tokenizer.save_pretrained(folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # v5 writes its own class name, unknown to v4
    config_path.write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    rng = random.Random(20261121)
    texts = build_classification(rng)
    build_wordpiece(texts)
    print(f"assets written under {ASSETS}")


if __name__ == "__main__":
    main()
