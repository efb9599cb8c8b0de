"""Model directories as data, the ground floor of specdash (imports nothing of specdash above it).

- :mod:`specdash.checkpoint.layout`: draft architecture names (EAGLE3, EAGLE-2), EAGLE3 layer tensor names.
- :mod:`specdash.checkpoint.model`: :class:`ModelDir` / :class:`TensorInfo`, what a directory is once read.
- :mod:`specdash.checkpoint.reader`: ``config.json`` + safetensors headers → :class:`ModelDir`, :class:`DraftInfo`;
  the one classifier of head kind (``DraftInfo.head_kind``) and of the ``d2t`` form (``classify_d2t``).
- :mod:`specdash.checkpoint.virtual`: the simulator's ``sim:NAME`` models as plain data.
- :mod:`specdash.checkpoint.tiny`: tiny header-true model directories (target, EAGLE3/EAGLE-2 draft) for tests.
"""
