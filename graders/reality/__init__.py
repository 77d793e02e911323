"""Where the lab's formulas meet reality: exact and simulated tails beside the graded ones.

``simulate.py`` (numpy, a precomputation only, never at grading time), ``curves.py`` (each
track's reality curves), ``store.py`` (their cache, built once, read while grading),
``table.py`` (where the formulas hold, for instructors). Nothing here is graded.
"""
