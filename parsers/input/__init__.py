"""Hostile input, read safely: every file, archive, JSON text, folder tree and number that comes from data.

Why one package: everything a bundle holds may be hostile (a FIFO named like a log, an archive bomb, JSON
nested a million deep, a 5,000-digit rank), so the bounds live here once and every reader above uses them.
Ground floor: it imports nothing else of ours, so the model and every stage may import it.

- `safeio`: files opened without blocking or following links, read with a byte cap;
- `archive`: a bundle archive unpacked with its size, name and type checks;
- `bounded_json`: JSON decoded with its memory bounded by the text's shape;
- `walk`: a folder tree walked iteratively, with a depth bound that says what it cut;
- `ints`: an integer taken out of data, bounded before it is built;
- `manifest_schema`: manifest.json's types and ranges, checked before anything is built from it;
- `errors`: the one error root (`HangForensicsError`); most of its kinds are input refused.
"""
