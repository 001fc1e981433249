"""What every rank of a running job writes into its job folder and reads from it: its heartbeat, the request to save a
checkpoint now, and `nbtoolkit.log`'s metrics from a custom loop. Light (no torch).
"""
