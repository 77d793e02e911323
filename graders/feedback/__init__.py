"""The HTML feedback page: curves measured against the student, checked for
the lab's invariants, plotted and rendered. Imports results, expected,
grading and sandbox."""
