"""What a grade is made of: the contract, the cases, comparison, credit rules,
checks with their feedback, hints and points. Imports the sandbox (to call
the student) and the shared base modules only."""
