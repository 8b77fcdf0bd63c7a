"""hang-forensics: name the rank and host that hung or crashed a distributed job, and why.

Data flows one way: discover -> collect -> bundle -> parse -> correlate -> verdict/report.
`forensics` owns discovery, collection, the bundle and the CLI; `parsers` owns reading
artifacts and correlating them into a verdict.
"""

__version__ = "0.1.0"

from forensics.trigger.watch import arm, disarm  # noqa: E402,F401 - the public entry points
