"""A Jupyter kernel for Scala notebooks on Spark with Warren: each cell runs in Spark's own
spark-shell REPL (driven through a pseudo-terminal by pexpect), started with Warren's jars.
See notebooks/README.md."""

__version__ = "0.1.0"
