"""A source's files into the one `Evidence` the judges read: opened, recognised, read once, grouped.

Why its own package, between the readers and the judges: a judge must not know whether a fact came from
a bundle's manifest or a loose file, and a collector must name its files as the reader expects them.

- `source`: a bundle, a loose folder, an archive of either, a log or stdin opened as one `Source` (files, hints);
- `registry`: the one table of kinds of file: how each is recognised, which reader reads it, who writes it;
- `evidence`: every file read once through the registry, grouped per process and host, with its `Coverage`;
- `quiet_gc`: the cyclic garbage collector paused while millions of small objects are built.
"""
