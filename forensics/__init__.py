"""hang-forensics: name the rank and host that hung or crashed a distributed job, and why.

Data flows one way: discover -> collect -> bundle -> parse -> correlate -> verdict/report.
`forensics` owns discovery, collection, the bundle and the CLI; `parsers` owns reading
artifacts and correlating them into a verdict.
"""

__version__ = "0.1.0"



def __getattr__(name: str):
    """`forensics.arm` / `forensics.disarm`, the public entry points, imported on first use: `import
    forensics` (and so `python -m forensics`) stays instant, which keeps Ctrl-C during start-up out of
    the watch module's imports, where no handler could turn it into one line."""
    if name in ("arm", "disarm"):
        from forensics.trigger import watch

        return getattr(watch, name)
    raise AttributeError(f"module 'forensics' has no attribute {name!r}")


__all__ = ["arm", "disarm", "__version__"]
