"""The README's quickstart, run as written on a kind cluster it creates (`make quickstart`, and
`make test`'s second lane after the end-to-end tests). Collected only with STREAMAPP_QUICKSTART=kind:
it needs the machine's one kind cluster to itself."""

import os

if os.environ.get("STREAMAPP_QUICKSTART") != "kind":
    collect_ignore_glob = ["test_*.py"]
