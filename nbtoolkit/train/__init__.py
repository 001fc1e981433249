"""`python -m nbtoolkit.train --spec spec.json`: the training program every backend runs by default.

Imports torch and transformers; outside the training process only `errors` (light) is imported at module
top, and nbtoolkit.inputs.data_preview reuses the data loading and tokenizer inside the function that measures data.
"""
