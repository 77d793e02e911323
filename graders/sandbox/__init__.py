"""The student's code behind a process boundary: the runner, the worker and its
wire format, the runtime folder, privileges, confinement, clean-up and the
submission file. Imports only the base modules (errors, units, versions)."""
