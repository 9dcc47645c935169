"""Steps and the CPU side (the second stage of ``kit.profile``): which kernels belong to which step.

- ``_windows.py``: decode/prefill steps and phases: the engines' markers, else any loop's repeated range,
  ``ProfilerStep#N``, graph launches, the model's forwards (``load(step_marker=)`` names the range), or
  gaps; and each step's span
- ``_cpu.py``: the CPU side of each step (launches, graph launches, memcpy/memset, syncs, CPU time vs
  GPU busy, GPU-idle gaps with their cause) and the GPU-/launch-/host-bound verdict
- ``_arrays.py``: array helpers over table columns (codes per distinct value, NaN means, stable order, each
  step's kernels by stream, which placement and layer finding read)
"""
