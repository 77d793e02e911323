"""The grading suite run by the plugin."""
