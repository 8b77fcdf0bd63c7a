"""C sources of the NCCL in-flight recorder (a profiler plugin and an LD_PRELOAD shim).

Nothing to import here: forensics.nccl_plugin builds and locates the libraries.
This file only makes the sources ship inside the Python package.
"""
