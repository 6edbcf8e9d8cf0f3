"""``python -m streamapp_api validate FILE...``"""

from .cli import main

raise SystemExit(main())
