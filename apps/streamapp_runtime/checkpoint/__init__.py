"""The checkpoint's home in the runtime: what the runtime itself reads and writes under a checkpoint
root, next to what Spark writes there.

- ``files``: read, write, list and copy files at a location (a volume's path, or an object store's URI
  through Spark's Hadoop FileSystem).
- ``layout``: the folders and files Spark keeps per query, and which batch is committed. Pure.
- ``record``: ``streamapp.json``, what the runtime decided at the checkpoint's first run.
- ``fence``: the owner marker that keeps a second driver off the checkpoint.
- ``copying``: a consistent copy of every query's last committed batch (docs/state-operations.md).

Where the root is (state generations, query folders) is the API's: ``streamapp_api.checkpoint``.
"""
