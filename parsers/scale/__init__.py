"""The scale path: analysis of a job of many ranks from its hosts' digests, not its raw files.

Why one package: these modules are one idea, read in this order. `digest` writes and reads a host's digest (its
files' evidence, bounded, and a `RankSummary` per rank); `merge` folds the digests into a `ClassSummary` (the
model's one merge, as hosts, gateways and the root use it); `classes` names the odd ones out, each rule stated
once over ranks grouped into classes; `digest_first` rebuilds the evidence from the digests and reads raw files
for the odd ones; `focus` builds evidence only for the hosts that can change the verdict. The typed summaries
themselves are the model's (`parsers.model.summaries`), next to the evidence they summarise.
"""
