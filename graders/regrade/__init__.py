"""A whole class: roster, job slots, jobs, resumable state, the class report and
histogram, progress. Runs ``graders grade`` per submission; imports results,
sandbox, the base modules and, of the plugin, only its option table and what a
submission's serving.py is (never its hooks)."""
