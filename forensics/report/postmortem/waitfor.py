"""The wait-for graph helpers, by their notebook-API name: they live in forensics.report.waitgraph,
part of the one view every output renders (the notebook depends on the report, never the other way round)."""

from forensics.report.waitgraph import (correlated_graph, culprits, edges_table, mark_suspects, nodes_with,  # noqa: F401
                                        waitfor_from_verdict)
