"""Track files: loading and validating ``tracks/*.toml``, and generating one
from MLSysIM. Imports grading (units of the contract) and the base modules."""
