"""Course distribution: the Gradescope zip and the student bundle, with their
templates. Imports expected (golden files), grading and the base modules."""
