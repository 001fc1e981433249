"""Build the bundled offline assets under nbtoolkit/assets/, and vision-chat's in its own folder (its task's
`assets`), deterministic; commit the output.

    python tools/build_assets.py

Every text here is written for nbtoolkit (templates + word lists below), so the assets carry
no third-party licence. The emotion labels follow the six of the `emotion` dataset the
Trainium tutorial fine-tunes on, so the example notebooks read the same.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

from nbtoolkit.inputs.bundled import tokenizer_dir
from nbtoolkit.tasks.vision_chat import ASSETS as VISION_CHAT_ASSETS
from nbtoolkit.tasks.vision_chat import TASK as VISION_CHAT

ASSETS = Path(__file__).resolve().parent.parent / "nbtoolkit" / "assets"

EMOTIONS: dict[str, dict[str, list[str]]] = {
    "sadness": {
        "feel": ["sad", "lonely", "miserable", "heartbroken", "gloomy", "down", "hopeless", "empty", "unhappy"],
        "why": [
            "my best friend moved away",
            "the trip was cancelled",
            "nobody called me back",
            "my dog is sick",
            "i failed the exam",
            "the garden died over winter",
            "we lost the final game",
            "the shop closed for good",
        ],
    },
    "joy": {
        "feel": ["happy", "cheerful", "delighted", "glad", "thrilled", "content", "joyful", "pleased", "elated"],
        "why": [
            "the sun came out",
            "i finished the project",
            "we won the match",
            "my sister got the job",
            "the bread came out perfect",
            "i passed the exam",
            "the weekend is here",
            "the concert was great",
        ],
    },
    "love": {
        "feel": ["loving", "tender", "affectionate", "devoted", "caring", "fond", "adoring", "warm hearted"],
        "why": [
            "she held my hand",
            "he wrote me a letter",
            "we spent the evening together",
            "my partner cooked dinner",
            "our baby smiled at me",
            "my grandmother hugged me",
            "he remembered our anniversary",
        ],
    },
    "anger": {
        "feel": ["angry", "furious", "irritated", "annoyed", "outraged", "bitter", "resentful", "mad", "livid"],
        "why": [
            "the bus left without me",
            "someone scratched my car",
            "they lied to me again",
            "the neighbours were loud all night",
            "my order arrived broken",
            "he took credit for my work",
        ],
    },
    "fear": {
        "feel": ["afraid", "scared", "anxious", "terrified", "nervous", "worried", "frightened", "uneasy", "panicked"],
        "why": [
            "the lights went out",
            "i heard steps behind me",
            "the test results are due",
            "the storm is coming",
            "i have to speak in public",
            "the plane started shaking",
            "the doctor wants to see me",
        ],
    },
    "surprise": {
        "feel": ["surprised", "amazed", "astonished", "shocked", "stunned", "startled", "speechless", "impressed"],
        "why": [
            "an old friend knocked on the door",
            "the price was half what i expected",
            "it snowed in may",
            "my brother showed up unannounced",
            "the ending of the film",
            "the results came in early",
        ],
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
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    save_portable(fast, ASSETS / "tokenizers" / "wordpiece")


def save_portable(tokenizer, folder: Path) -> None:
    """Save so that transformers 4 (SageMaker's containers) and 5 both load it."""
    tokenizer.save_pretrained(folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # v5 writes its own class name, unknown to v4
    config_path.write_text(json.dumps(config, indent=2) + "\n")


# -- shared vocabulary for the news, QA and wiki samples (invented people, places and firms) ----------

FIRST_NAMES = [
    "Ada",
    "Bruno",
    "Clara",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Luca",
    "Maya",
    "Nikolai",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Samir",
    "Tilda",
    "Umar",
    "Vera",
    "Wendell",
    "Ximena",
    "Yusuf",
    "Zora",
]
LAST_NAMES = [
    "Abara",
    "Bellweather",
    "Castellan",
    "Dunmore",
    "Eskildsen",
    "Fairbairn",
    "Galloway",
    "Hartigan",
    "Ivers",
    "Jaramillo",
    "Kettering",
    "Lindqvist",
    "Marchetti",
    "Northcott",
    "Okafor",
    "Pemberton",
    "Quist",
    "Ravenhill",
    "Sandoval",
    "Thorne",
    "Underhill",
    "Varga",
    "Whitlock",
    "Yardley",
]
TOWNS = [
    "Aldermoor",
    "Brindleford",
    "Carrow Bay",
    "Dunhallow",
    "Eastmere",
    "Fennick",
    "Glasswater",
    "Harrowgate",
    "Ivybridge Vale",
    "Juniper Falls",
    "Kestrel Point",
    "Larkspur",
    "Millbrook",
    "Northwold",
    "Oakhaven",
    "Pennycross",
    "Quarry Hill",
    "Redfern",
    "Saltmarsh",
    "Thistledown",
    "Upper Ashby",
    "Westcombe",
]
COUNTIES = ["Greyshire", "Highmoor", "the Lowland Coast", "Marrowdale", "the Northern Fells", "Sunderby"]
PROFESSIONS = [
    "chemist",
    "architect",
    "novelist",
    "engineer",
    "botanist",
    "composer",
    "astronomer",
    "painter",
    "economist",
    "marine biologist",
    "sculptor",
    "historian",
]
SUBJECTS = [
    "chemistry",
    "architecture",
    "literature",
    "mechanical engineering",
    "botany",
    "music",
    "physics",
    "fine art",
    "economics",
    "marine biology",
    "history",
    "mathematics",
]
WORKS = [
    "a new way to purify river water",
    "the design of the Glasswater library",
    "a trilogy of harbour novels",
    "a quieter railway brake",
    "a catalogue of mountain mosses",
    "a symphony for brass and choir",
    "the discovery of a faint comet",
    "a series of coastal landscapes",
    "a study of village markets",
    "a survey of kelp forests",
    "bronze statues of dock workers",
    "a history of the salt trade",
]
ORGS = [
    "a small research institute",
    "a community theatre",
    "an engineering workshop",
    "a seed bank",
    "a music school",
    "a public observatory",
    "an art cooperative",
    "a local newspaper",
]
PRIZES = [
    "Harland Medal",
    "Silver Quill Award",
    "Meridian Prize",
    "Copperleaf Award",
    "Northern Star Prize",
    "Beacon Fellowship",
]
INDUSTRIES = ["software", "bakery", "shipping", "solar panel", "bicycle", "furniture", "textile", "pharmacy"]
COMPANIES = [
    "Brightwell Systems",
    "Copper Kettle Bakeries",
    "Harbourline Freight",
    "Sunfield Energy",
    "Velo Works",
    "Oakhaven Furniture",
    "Loomcraft Textiles",
    "Greenleaf Pharmacies",
]
TEAMS = [
    "Aldermoor Rovers",
    "Brindleford United",
    "Carrow Bay Athletic",
    "Dunhallow Town",
    "Eastmere City",
    "Fennick Wanderers",
    "Glasswater Rangers",
    "Harrowgate Albion",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
COUNCIL_ACTIONS = [
    ("build a new footbridge over the river", "traffic on the old bridge"),
    ("open a public library on the high street", "the closure of two school libraries"),
    ("plant two thousand trees along the ring road", "complaints about summer heat"),
    ("repair the flooded sea wall", "storms damaged the harbour last winter"),
    ("add a night bus between the station and the hospital", "a petition signed by nurses"),
    ("turn the old gasworks into a park", "years of campaigning by local families"),
]
WORRIES = ["noise during construction", "the cost to local taxpayers", "parking near the site", "delays to buses"]
FINDINGS = [
    ("sleeping an extra hour improves memory in teenagers", "teenagers"),
    ("city foxes travel further at night than country foxes", "foxes"),
    ("walking after meals lowers blood sugar", "adults"),
    ("bees visit blue flowers more often in cold weather", "bee colonies"),
    ("reading aloud helps children learn new words faster", "children"),
    ("oyster reefs calm waves during storms", "reefs"),
]


def pick(rng: random.Random, values: list):
    return values[rng.randrange(len(values))]


def person(rng: random.Random) -> tuple[str, str]:
    first, last = pick(rng, FIRST_NAMES), pick(rng, LAST_NAMES)
    return f"{first} {last}", last


def news_article(rng: random.Random) -> dict[str, str]:
    """One short news story and its highlights (the summary copies its key facts, as cnn_dailymail's do)."""
    kind = rng.randrange(4)
    town, (name, last), weekday, month = pick(rng, TOWNS), person(rng), pick(rng, WEEKDAYS), pick(rng, MONTHS)
    if kind == 0:
        (action, reason), cost = pick(rng, COUNCIL_ACTIONS), rng.randint(2, 40)
        votes_for = rng.randint(9, 20)
        article = (
            f"{town} city council voted {votes_for} to {rng.randint(1, votes_for - 1)} on {weekday} to {action}. "
            f"The plan, which will cost about {cost} million pounds, was proposed by councillor {name} after "
            f'{reason}. "This is money well spent for the whole town," {last} told reporters after the meeting. '
            f"Work is expected to begin in {month} and to take {rng.randint(3, 30)} months. Some residents said "
            f"they were worried about {pick(rng, WORRIES)}, but the council promised regular public updates."
        )
        highlights = (
            f"{town} council votes to {action}. The plan will cost about {cost} million pounds. Work begins in {month}."
        )
    elif kind == 1:
        home, away = rng.sample(TEAMS, 2)
        goals, against, place = rng.randint(2, 5), rng.randint(0, 1), pick(rng, ["first", "second", "third", "fourth"])
        article = (
            f"{home} beat {away} {goals}-{against} at home on {weekday} night in front of a crowd of "
            f"{rng.randint(3, 40)} thousand. Striker {name} scored twice in the second half after a quiet "
            f'first hour. "We kept believing until the end," said {last}, who joined the club in {month}. '
            f"The win moves {home} up to {place} place in the league with {rng.randint(4, 12)} games left. "
            f"{away} have now lost three matches in a row and face a difficult trip next week."
        )
        highlights = f"{home} beat {away} {goals}-{against}. {name} scores twice. {home} move up to {place} place."
    elif kind == 2:
        index = rng.randrange(len(COMPANIES))
        company, industry, staff, rise = COMPANIES[index], INDUSTRIES[index], rng.randint(40, 900), rng.randint(2, 15)
        article = (
            f"{company}, the {industry} firm based in {town}, said on {weekday} that it would hire {staff} "
            f"new staff over the next year. Chief executive {name} said strong sales abroad had made the "
            f'expansion possible. "Our orders have never been higher," {last} said. Shares in the company '
            f"rose {rise} percent after the announcement. The new jobs will be based at a site on the edge "
            f"of {town}, which the firm bought in {month}."
        )
        highlights = f"{company} to hire {staff} new staff in {town}. Shares rise {rise} percent."
    else:
        (finding, subjects), count, years = pick(rng, FINDINGS), rng.randint(50, 3000), rng.randint(2, 12)
        article = (
            f"Scientists at the University of {town} have found that {finding}. The study, published on "
            f"{weekday}, followed {count} {subjects} over {years} years. Lead author {name} said the result "
            f'surprised the team. "We expected a small effect, not a clear one," {last} said. Other '
            f"researchers said the work should be repeated in other places before firm advice is given."
        )
        highlights = f"University of {town} study finds {finding}. It followed {count} {subjects} for {years} years."
    return {"article": article, "highlights": highlights}


def fill(template: str, values: dict[str, str]) -> tuple[str, dict[str, int]]:
    """`template` with its {fields} filled, and where each field's first occurrence starts."""
    text, starts = "", {}
    for literal, field, _, _ in string.Formatter().parse(template):
        text += literal
        if field is not None:
            starts.setdefault(field, len(text))
            text += values[field]
    return text, starts


BIOGRAPHY = (
    "{name} is a {profession} who was born in {town} in {year}. {Pronoun} studied {subject} at the "
    "University of {college} and later moved to {home}, a town in {county}, where {pronoun} founded "
    "{org}. In {prize_year}, {last} won the {prize} for {work}. {Pronoun} is married to {spouse} "
    "and has {children} children. Friends describe {last} as patient, curious and fond of long walks by "
    "the sea."
)
QUESTIONS = [
    ("Where was {name} born?", "town"),
    ("In which year was {name} born?", "year"),
    ("What did {name} study?", "subject"),
    ("Where did {name} move to?", "home"),
    ("What did {last} found in {home}?", "org"),
    ("Which prize did {last} win in {prize_year}?", "prize"),
    ("What did {last} win the {prize} for?", "work"),
    ("Who is {name} married to?", "spouse"),
    ("What is {name}'s profession?", "profession"),
]


def qa_examples(contexts: int, rng: random.Random, prefix: str) -> list[dict]:
    """SQuAD-style rows: one short biography, several questions on it, answers as spans of the context."""
    rows = []
    for index in range(contexts):
        name, last = person(rng)
        she = rng.random() < 0.5
        job = rng.randrange(len(PROFESSIONS))
        year = rng.randint(1931, 1990)
        values = {
            "name": name,
            "last": last,
            "profession": PROFESSIONS[job],
            "subject": SUBJECTS[job],
            "work": WORKS[job],
            "town": pick(rng, TOWNS),
            "year": str(year),
            "college": pick(rng, TOWNS),
            "home": pick(rng, TOWNS),
            "county": pick(rng, COUNTIES),
            "org": pick(rng, ORGS),
            "prize_year": str(year + rng.randint(28, 34)),
            "prize": pick(rng, PRIZES),
            "spouse": person(rng)[0],
            "children": pick(rng, ["two", "three", "four", "no"]),
            "Pronoun": "She" if she else "He",
            "pronoun": "she" if she else "he",
        }
        context, starts = fill(BIOGRAPHY, values)
        for number, (question, field) in enumerate(rng.sample(QUESTIONS, 3)):
            rows.append(
                {
                    "id": f"{prefix}-{index:04d}-{number}",
                    "title": name,
                    "context": context,
                    "question": question.format(**values),
                    "answers": {"text": [values[field]], "answer_start": [starts[field]]},
                }
            )
    return rows


TOWN_ARTICLE = [
    (
        "{town} is a market town in {county}, on the banks of the river {river}. It grew around a wool market in "
        "the twelfth century and received its charter in {year}. The town is known for its stone bridge, its "
        "covered market hall and the annual {festival}, which draws visitors from across the region."
    ),
    (
        "The economy of {town} was long based on {trade}. When the railway arrived in {rail_year}, new workshops "
        "opened near the station and the population doubled within a generation. Today most residents work in "
        "services, education and small manufacturing firms."
    ),
    (
        "{town} has a mild climate. The wettest month is usually {month}, and snow is rare on the lower streets, "
        "although the hills to the north are often white for several weeks each winter."
    ),
    (
        "Notable buildings include the church of Saint {saint}, the old customs house and the {company} works, "
        "now a museum of local industry. The town library holds a collection of maps of {county} dating back to "
        "the seventeenth century."
    ),
]
RIVERS = ["Ash", "Brill", "Cole", "Dane", "Esk", "Frome", "Gade", "Hull", "Isbourne", "Kennet"]
FESTIVALS = ["lantern parade", "cheese fair", "folk music week", "boat race", "apple harvest festival", "kite day"]
TRADES = ["wool and cloth", "fishing", "salt panning", "boat building", "coal mining", "paper making"]
SAINTS = ["Agnes", "Bartholomew", "Cuthbert", "Dunstan", "Edith", "Felix", "Giles", "Hilda"]


def wiki_rows(towns: list[str], rng: random.Random) -> list[dict[str, str]]:
    """wikitext-style rows: a ` = Title = ` heading, paragraphs, and the empty lines between them."""
    rows = []
    for town in towns:
        values = {
            "town": town,
            "county": pick(rng, COUNTIES),
            "river": pick(rng, RIVERS),
            "year": str(rng.randint(1150, 1390)),
            "festival": pick(rng, FESTIVALS),
            "trade": pick(rng, TRADES),
            "rail_year": str(rng.randint(1840, 1880)),
            "month": pick(rng, MONTHS),
            "saint": pick(rng, SAINTS),
            "company": pick(rng, COMPANIES),
        }
        rows += [{"text": ""}, {"text": f" = {town} = "}, {"text": ""}]
        rows += [{"text": " " + paragraph.format(**values) + " "} for paragraph in TOWN_ARTICLE]
    return rows


TOWN_STARTS = [
    "Ash",
    "Bram",
    "Cold",
    "Dun",
    "Elm",
    "Fox",
    "Gold",
    "Hart",
    "Iron",
    "Kings",
    "Long",
    "Marsh",
    "Nether",
    "Old",
    "Pine",
    "Red",
    "Stone",
    "Thorn",
    "Wel",
    "Wyn",
]
TOWN_ENDS = ["ford", "bury", "wick", "ton", "mere", "field", "combe", "stead"]


def build_task_samples() -> list[str]:
    """The summarization, question-answering and causal-lm samples; returns their text (for the tokenizers)."""
    rng = random.Random(3)
    wiki_towns = rng.sample([start + end for start in TOWN_STARTS for end in TOWN_ENDS], 68)
    samples = {
        "summarization": {
            "train": [news_article(rng) for _ in range(320)],
            "validation": [news_article(rng) for _ in range(32)],
        },
        "question-answering": {"train": qa_examples(160, rng, "train"), "validation": qa_examples(16, rng, "val")},
        "causal-lm": {"train": wiki_rows(wiki_towns[:60], rng), "validation": wiki_rows(wiki_towns[60:], rng)},
    }
    texts = []
    for task, splits in samples.items():
        for split, rows in splits.items():
            write_jsonl(ASSETS / "data" / task / f"{split}.jsonl", rows)
            texts += [value for row in rows for value in row.values() if isinstance(value, str)]
    return texts


def build_byte_bpe(texts: list[str]) -> None:
    """A GPT-2-style byte-level BPE; `<|endoftext|>` is bos, eos and (unlike GPT-2's) pad."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    end = "<|endoftext|>"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=2000, special_tokens=[end], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=end, eos_token=end, unk_token=end, pad_token=end, model_max_length=512
    )
    save_portable(fast, ASSETS / "tokenizers" / "byte-bpe")


def build_sentencepiece_style(texts: list[str]) -> None:
    """A T5-style tokenizer (Metaspace pieces): <pad> 0, </s> 1 (appended to every text), <unk> 2.

    BPE rather than T5's unigram: the unigram trainer makes odd pieces from text this repetitive.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"], initial_alphabet=list(string.printable.strip())
        ),
    )
    eos = tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=512
    )
    save_portable(fast, ASSETS / "tokenizers" / "sentencepiece-style")


GREETINGS = [
    ("hello", "Hello! How can I help you today?"),
    ("hi there", "Hi! What would you like to know?"),
    ("good morning", "Good morning! What can I do for you?"),
    ("thanks for the help", "You are welcome. Happy to help."),
    ("who are you", "I am a tiny assistant trained by nbtoolkit."),
]


def arithmetic_question(rng: random.Random) -> tuple[str, str, int]:
    """A one-digit sum or difference: its question, the expression and the answer."""
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    op = rng.choice("+-")
    if op == "-" and b > a:
        a, b = b, a
    answer = a + b if op == "+" else a - b
    return f"What is {a} {op} {b}?", f"{a} {op} {b}", answer


def emotion_question(rng: random.Random) -> tuple[str, str]:
    """A sentence to read for its emotion, and the emotion."""
    label = rng.choice(sorted(EMOTIONS))
    text = rng.choice(TEMPLATES).format(
        feel=rng.choice(EMOTIONS[label]["feel"]), why=rng.choice(EMOTIONS[label]["why"])
    )
    return f"Which emotion is in this sentence: {text}", label


def chat_conversation(rng: random.Random) -> dict[str, list[dict[str, str]]]:
    """A conversation in the messages format: one to three turns of sums, emotions or greetings."""
    messages = [{"role": "system", "content": "You are a helpful assistant."}] if rng.random() < 0.3 else []
    for _ in range(rng.choice([1, 1, 2, 3])):
        kind = rng.random()
        if kind < 0.45:
            question, expression, answer = arithmetic_question(rng)
            reply = f"{expression} = {answer}. The answer is {answer}."
        elif kind < 0.85:
            question, label = emotion_question(rng)
            reply = f"The emotion is {label}."
        else:
            question, reply = rng.choice(GREETINGS)
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
    return {"messages": messages}


def preference_pair(rng: random.Random) -> dict[str, list[dict[str, str]]]:
    """A prompt with a right (chosen) and a wrong or curt (rejected) reply, as conversations."""
    if rng.random() < 0.5:
        question, expression, answer = arithmetic_question(rng)
        wrong = answer + rng.choice([-2, -1, 1, 2])
        chosen, rejected = f"{expression} = {answer}. The answer is {answer}.", f"The answer is {wrong}."
    else:
        question, label = emotion_question(rng)
        other = rng.choice([name for name in sorted(EMOTIONS) if name != label])
        chosen, rejected = f"The emotion is {label}.", rng.choice([f"The emotion is {other}.", "I do not know."])
    return {
        "prompt": [{"role": "user", "content": question}],
        "chosen": [{"role": "assistant", "content": chosen}],
        "rejected": [{"role": "assistant", "content": rejected}],
    }


def arithmetic_prompt(rng: random.Random) -> dict:
    """A GRPO prompt with the answer a reward function checks."""
    question, _, answer = arithmetic_question(rng)
    return {"prompt": [{"role": "user", "content": f"{question} Answer with the number."}], "answer": str(answer)}


def build_chat_samples() -> list[str]:
    """The chat (messages), preference (prompt/chosen/rejected) and grpo (prompt + answer) samples; their text."""
    rng = random.Random(25)
    samples = {
        "chat": {
            "train": [chat_conversation(rng) for _ in range(160)],
            "validation": [chat_conversation(rng) for _ in range(16)],
        },
        "preference": {
            "train": [preference_pair(rng) for _ in range(120)],
            "validation": [preference_pair(rng) for _ in range(16)],
        },
        "grpo": {
            "train": [arithmetic_prompt(rng) for _ in range(64)],
            "validation": [arithmetic_prompt(rng) for _ in range(8)],
        },
    }
    texts = []
    for task, splits in samples.items():
        for split, rows in splits.items():
            write_jsonl(ASSETS / "data" / task / f"{split}.jsonl", rows)
            texts += [
                message["content"]
                for row in rows
                for value in row.values()
                if isinstance(value, list)
                for message in value
            ]
    return texts


def build_chatml_bpe(texts: list[str]) -> None:
    """A byte-level BPE with ChatML's tokens and template (nbtoolkit.inputs.chat_formats.CHATML): the tiny chat model's.

    `<|im_end|>` ends a turn and is eos (generation stops there); `<|endoftext|>` pads.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from nbtoolkit.inputs.chat_formats import CHATML

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.train_from_iterator(
        [*texts, "user", "assistant", "system"],
        trainers.BpeTrainer(
            vocab_size=1000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=512,
    )
    fast.chat_template = CHATML
    save_portable(fast, ASSETS / "tokenizers" / "chatml-bpe")


#: the bundled images: a shape in a colour on white, 48 px (the tiny vision model's processor resizes them to 28)
SHAPE_COLOURS = {"red": (214, 40, 40), "blue": (40, 90, 214), "green": (40, 160, 70), "yellow": (230, 200, 30)}
SHAPES = ("circle", "square")
VISION_QUESTIONS = [
    ("What shape is this?", "A {shape}."),
    ("What colour is the shape?", "It is {colour}."),
    ("Describe the picture.", "A {colour} {shape} on a white background."),
]


def build_images(folder: Path) -> list[str]:
    """The bundled PNGs, one per colour and shape; their names (e.g. red-circle.png)."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for colour, rgb in SHAPE_COLOURS.items():
        for shape in SHAPES:
            image = Image.new("RGB", (48, 48), (255, 255, 255))
            draw = ImageDraw.Draw(image)
            (draw.ellipse if shape == "circle" else draw.rectangle)((8, 8, 40, 40), fill=rgb)
            name = f"{colour}-{shape}.png"
            image.save(folder / name, optimize=True)
            names.append(name)
    return names


def vision_rows(names: list[str], count: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(image path, question, answer) triples about the bundled images."""
    rows = []
    for _ in range(count):
        name = rng.choice(names)
        colour, shape = name.removesuffix(".png").split("-")
        question, answer = rng.choice(VISION_QUESTIONS)
        rows.append((f"images/{name}", question, answer.format(colour=colour, shape=shape)))
    return rows


def build_vision_samples() -> None:
    """The vision-chat sample: TRL's format (messages with an image part + images) as jsonl, and the same kind of
    rows in LLaVA's JSON (conversations with <image>, an image field) beside it; image paths relative to the file."""
    folder = VISION_CHAT_ASSETS / "data"
    names = build_images(folder / "images")
    rng = random.Random(36)
    for split, count in (("train", 64), ("validation", 8)):
        rows = [
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]},
                    {"role": "assistant", "content": [{"type": "text", "text": answer}]},
                ],
                "images": [image],
            }
            for image, question, answer in vision_rows(names, count, rng)
        ]
        write_jsonl(folder / f"{split}.jsonl", rows)
        llava = [
            {
                "id": f"{split}-{index:03d}",
                "image": image,
                "conversations": [{"from": "human", "value": f"<image>\n{question}"}, {"from": "gpt", "value": answer}],
            }
            for index, (image, question, answer) in enumerate(vision_rows(names, count // 2, rng))
        ]
        (folder / f"llava-{split}.json").write_text(json.dumps(llava, indent=1) + "\n")


def build_chatml_vision() -> None:
    """The tiny vision model's processor: the ChatML tokenizer with Gemma 3's three image tokens, a template that
    renders image parts (nbtoolkit.tasks.vision_chat.formats.CHATML_VISION), and Gemma 3's image processor at 28 px giving 4 image
    tokens per image (the tiny model's mm_tokens_per_image). Saved as a processor, so AutoProcessor loads the folder."""
    from transformers import AutoTokenizer, Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    from nbtoolkit.tasks.vision_chat.formats import CHATML_VISION

    tokenizer = AutoTokenizer.from_pretrained(
        ASSETS / "tokenizers" / "chatml-bpe",
        extra_special_tokens={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
    )
    image_processor = Gemma3ImageProcessorPil(size={"height": 28, "width": 28})
    processor = Gemma3Processor(image_processor, tokenizer, chat_template=CHATML_VISION, image_seq_length=4)
    folder = tokenizer_dir(VISION_CHAT.bundled_model)
    processor.save_pretrained(folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    for key in ("is_local", "local_files_only"):  # where this machine loaded it from: not the asset's business
        config.pop(key, None)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # as save_portable: v5 writes its own class name
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def main() -> None:
    rng = random.Random(20261121)
    texts = build_classification(rng)
    build_wordpiece(texts)
    task_texts = build_task_samples()
    build_byte_bpe(task_texts)
    build_sentencepiece_style(task_texts)
    build_chatml_bpe(build_chat_samples())
    build_vision_samples()
    build_chatml_vision()
    print(f"assets written under {ASSETS} and {VISION_CHAT_ASSETS}")


if __name__ == "__main__":
    main()
