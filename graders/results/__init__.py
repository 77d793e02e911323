"""What a grading writes: Gradescope results, the terminal table, Classroom
results, output files written safely and text escaped for each medium.
Imports grading (scores) and the base modules."""
