"""What a run reads before it starts, checked and shown on this machine: its data files, data and chat previews, chat
formats, the bundled tiny models and samples, packaged models, and the preflight over all of them.
"""
