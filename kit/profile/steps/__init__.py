"""Steps and the CPU side (the second stage of ``kit.profile``): which kernels belong to which step.

- ``_windows.py``: decode/prefill steps and phases (the engines' markers, a loop's repeated range,
  ``ProfilerStep#N``, graph launches, the model's forwards or gaps) and each step's span
- ``_cpu.py``: the CPU side of each step (launches, syncs, host time, GPU-idle gaps with their cause) and
  the GPU-/launch-/host-bound verdict
- ``_arrays.py``: array helpers over table columns (codes per distinct value, NaN means, intervals, each
  step's kernels by stream)
"""
