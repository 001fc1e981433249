"""`python -m nbtoolkit.train --spec spec.json`: the training program every backend runs by default.

Imports torch and transformers; nothing outside the training process imports this package.
"""
