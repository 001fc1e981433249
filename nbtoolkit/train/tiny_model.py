"""`python -m nbtoolkit.train.tiny_model`: a randomly initialised tiny model saved as a model directory.

The rehearsal's model: a real model's config with its sizes scaled down, the bundled tokenizer of
its family, saved with `save_pretrained` so the training program loads it as any local model.
Run as its own process so that the caller (a notebook kernel) never imports transformers.
"""

from __future__ import annotations

import argparse
import json

from transformers import AutoConfig, AutoModel

from nbtoolkit.train.models import load_tokenizer


def build(config_fields: dict, tokenizer_of: str, out: str) -> None:
    tokenizer = load_tokenizer(tokenizer_of)
    fields = dict(config_fields)
    model_type = fields.pop("model_type")
    special = {
        f"{role}_token_id": getattr(tokenizer, f"{role}_token_id")
        for role in ("bos", "eos", "pad")
        if getattr(tokenizer, f"{role}_token_id") is not None
    }
    if fields.get("is_encoder_decoder") or model_type in ("t5", "mt5", "umt5"):
        special["decoder_start_token_id"] = tokenizer.pad_token_id
    fields = {key: value for key, value in fields.items() if not key.endswith("_token_id")}
    config = AutoConfig.for_model(model_type, **{**fields, **special, "vocab_size": len(tokenizer)})
    AutoModel.from_config(config).save_pretrained(out)
    tokenizer.save_pretrained(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="config.json fields, as JSON")
    parser.add_argument("--tokenizer-of", required=True, help="the bundled tiny model whose tokenizer to use")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    build(json.loads(args.config), args.tokenizer_of, args.out)


if __name__ == "__main__":
    main()
