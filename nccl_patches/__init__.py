"""C sources of the recorder (an NCCL profiler plugin and an LD_PRELOAD shim).

Nothing to import here: forensics.recorder_build builds and locates the libraries.
This file only makes the sources ship inside the Python package.
"""
