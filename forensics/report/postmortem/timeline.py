"""The per-rank 'last operation reached' entries, by their notebook-API name: they live in
forensics.report.lastop, part of the one view every output renders (the notebook depends on the
report, never the other way round)."""

from forensics.report.lastop import (NOT_PLACED, TimelineEntry, add_events, entries_from_ops, merged_tree,  # noqa: F401
                                     normalise_frame, order_stations, rank_paths, station_label, timeline_from_verdict,
                                     tree_from_paths)
