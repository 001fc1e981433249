"""Runs that start from earlier ones: a job's complete checkpoints, forks from one with changed settings, and `model:
job:ID` chains resolved at launch.
"""
