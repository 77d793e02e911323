"""Expected values: the reference in this process, or a golden file where the
reference is absent. Imports grading (cases) and the base modules."""
