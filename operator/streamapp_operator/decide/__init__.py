"""Pure decisions: plain data in, plain data out, no clock and no I/O (``now`` is an argument)."""
