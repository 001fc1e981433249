"""A finished job's model: where it lives, its saved folder, its model card, export (merged, GGUF), serving (an OpenAI-
compatible server, vLLM), a warm process for predict and Try it, lm-evaluation-harness.
"""
