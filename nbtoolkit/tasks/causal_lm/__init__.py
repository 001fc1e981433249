"""causal-lm: a decoder-only language model continues texts (packed into blocks, perplexity at evaluation)."""

from nbtoolkit.tasks import Task

TASK = Task(
    "causal-lm",
    {"text_column": "text"},
    "nbtoolkit/tiny-gpt2",
    "causal-lm",
    "a decoder-only language model such as gpt2, llama or qwen2",
    "nbtoolkit.tasks.causal_lm.train",
    pipeline_tag="text-generation",
    auto_model="AutoModelForCausalLM",
    peft_task_type="CAUSAL_LM",
    prompt="the start of a text to continue",
    answer="nbtoolkit.tasks.causal_lm.answer:continue_text",
    packs_texts=True,
    preview_lengths="nbtoolkit.tasks.causal_lm.preview:token_lengths",
    preview_note="causal-lm packs the texts into blocks of dataset.max_length {data.max_length} tokens: nothing is cut",
    listed=40,
)
