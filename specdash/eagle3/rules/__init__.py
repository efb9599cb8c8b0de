"""The preflight doctor's rules, one module per concern.

Each ``rule_*`` function takes a :class:`~specdash.eagle3.rules.context.RuleContext`, reads
what it needs and appends :class:`~specdash.eagle3.findings.Finding` objects;
:func:`specdash.eagle3.doctor.run_doctor` calls them in a fixed order.  Codes and where they
are decided:

==============  ====================  ========================================================
FLAG            ``flags``             flags the judged release does not accept (argparse: exit 2)
GPUS            ``nodes``             one machine: tp × pp vs its GPUs (the simulator's scenario, or NVML
                                      and CUDA_VISIBLE_DEVICES when the doctor reads them)
NODES           ``nodes``             multi-node profiles: tp × pp vs GPUs per node × nodes, per-node
                                      overrides of model / speculative flags, the rendezvous address
                                      (``dist_init_addr``) and its port vs the HTTP port
DRAFT_PATH      ``draft``             no draft path (bundled-MTP targets only), or a missing path
ALGO_MISMATCH   ``draft``             head kind vs ``--speculative-algorithm`` (an EAGLE3 head
                                      served with EAGLE accepts nothing)
WEIGHT_KEYS     ``weights``           tensor names the judged loader drops silently (``layers.0.*``
                                      before 0.5.12, foreign prefixes, ``input_norm`` before 0.5.17)
MISSING_WEIGHT  ``weights``           parameters no tensor provides (fc, lm_head when
                                      ``draft_vocab_size`` is set, layer parts, norms)
WEIGHT_SHAPE    ``weights``           a tensor whose shape differs from what the config builds
VOCAB_MAP       ``vocab``             d2t / t2d / lm_head vs the draft and target vocabularies
AUX_LAYERS      ``aux_layers``        which target layers SGLang captures vs what the head expects
SPEC_ARGS       ``serving``           rejections and silent adjustments of the speculative flags
ADAPTIVE        ``adaptive``          ``--speculative-adaptive`` / ``--speculative-adaptive-config`` by
                                      release: fall-backs to static settings, config format and values,
                                      launch steps vs the candidates, draft tokens set to steps + 1
CONTEXT_LEN     ``serving``           draft ``max_position_embeddings`` vs the serving context
DTYPE           ``serving``           draft/target dtypes (``--dtype auto`` runs float32 as float16)
MEMORY          ``serving``           weights vs ``mem_fraction_static`` × GPU memory
SIMULATED       ``simulated``         ``SGLANG_SIMULATE_ACC_LEN`` / dummy load formats: ``info`` in a
                                      profile with ``testbed = true``, ``error`` in any other
ARGCHECK        ``argcheck``          SGLang's own prepare_server_args / check_server_args on the exact argv,
                                      where the profile's Python has SGLang (refusals, rewrites, a note)
CHECKPOINT      ``doctor`` & others   a directory that cannot be read, pickle-only weights, missing
                                      shards, a check that could not run
==============  ====================  ========================================================

Grouping: ``draft`` puts DRAFT_PATH with ALGO_MISMATCH because both answer "is the head SGLang
will load the kind this algorithm needs"; FLAG (argparse and the release's flag list) stands
alone.  SGLang's capture facts live in :mod:`specdash.sglang.capture`, the checkpoint
classifiers (head kind, d2t form) in :mod:`specdash.checkpoint.reader`, so the simulator
reads the same facts.
"""
