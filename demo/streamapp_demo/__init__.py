"""`make demo` (``python -m streamapp_demo``): the click-sessions example on the local test bed.

Kept out of the runtime package, so that the runtime image ships no demo and imports no test bed.
"""
