"""``python -m dtorch.worker``: see ``dtorch.worker.main``."""

import sys

from dtorch.worker.main import main

if __name__ == "__main__":
    sys.exit(main())
