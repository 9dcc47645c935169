"""Attribution and placement (the third stage of ``kit.profile``): what each kernel is, and where it runs.

- ``_categories.py``: the rule tables (``categories.toml``: kernel names, module roles, CPU frames, op
  sequences, fused names), the category names the code decides by, and the model structure the table
  describes (roles' layer kinds and operation families, each category's family: ``structure()``,
  ``role_of``, ``layer_kind``)
- ``_names.py``: kernel names normalised (``kernel_family``, ``canonical``), graph launches and the ops that
  wait for the GPU
- ``_attribution.py``: kernel -> launch -> enclosing frames -> category, ``decided_by``, module, layer
- ``_sequences.py``: unfused op sequences (RMSNorm, rotate_half, cache cat, MoE router + experts) from
  the CPU op tree, for traces without module frames
- ``_evidence.py``: what the decisions add up to: time per evidence, per module and layer, the undecided
  share and its warning
- ``_layers.py``: ``Profile.find_layers()``: layer boundaries from the repetition of the kernel sequence
- ``_place.py``: ``load(trace, reference=REF)``: graph-replayed kernels and kernels of traces without
  stack take their counterpart's layer, module, op and category by aligning each step's kernel sequence
  with the reference's; scores per step and layer, unplaced share with its reason, refusal of another program
"""
