"""Group bisection: find bad machines by running real test jobs on groups of hosts.

designs plan rounds, decode turns job outcomes into P(bad) per host, engine ties the
two to a resumable state, runner runs rounds through a launcher, simulate plays the
same designs against a model cluster, report renders the verdict.
"""
