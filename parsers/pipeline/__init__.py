"""The one analysis pipeline and its arbiter: source -> read -> judge -> merge.

- `analyze`: runs it for a bundle, a loose folder or an archive (the judges in the order of `JUDGES`);
- `merge`: the arbiter, every judge's typed findings into one verdict, in a fixed order;
- `sinks`: the arbiter's independent sinks of the wait-for graph, each a culprit of its own.
"""
