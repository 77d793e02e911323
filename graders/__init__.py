"""A pytest-plugin autograder for the model-serving lab."""

__version__ = "0.1.0"
