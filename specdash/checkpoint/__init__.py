"""Model directories as data, the ground floor of specdash (imports nothing of specdash above it).

- :mod:`specdash.checkpoint.layout`: draft architecture names, EAGLE3 layer tensor names.
- :mod:`specdash.checkpoint.reader`: ``config.json`` + safetensors headers → :class:`ModelDir`, :class:`DraftInfo`.
- :mod:`specdash.checkpoint.virtual`: the simulator's ``sim:NAME`` models as plain data.
"""
