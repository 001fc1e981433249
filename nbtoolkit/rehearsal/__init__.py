"""Rehearse a real run on this machine before it costs money: the rows it trains on, and a side environment of the
packages the launch's image runs.
"""
