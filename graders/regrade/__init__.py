"""A whole class: roster, job slots, jobs, resumable state, the class report and
histogram, progress. Runs ``graders grade`` per submission; imports results,
sandbox and the base modules, never the plugin."""
