"""What a launch is and carries, between a backend and the program it starts: the Launch contract, the runtime contract
(file names, how errors are said), the program folder that ships where nbtoolkit is not installed, credentials that
never land in job files, user text rendered as data.
"""
