"""Fleet collection: run the local collector on every host of a job and merge the bundles.

Flow: hosts (NodeSet / hostfile / Slurm) -> one safely quoted remote command per host
(ssh through ClusterShell with bounded fan-out, or `srun --overlap`) -> each host
streams back its bundle archive -> `forensics.bundle.merge` joins them into one job
bundle, where a host that failed or did not answer in time is itself a record.
"""
