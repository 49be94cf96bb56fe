"""``python -m brokernodes --config metadata.json --data-dir DIR --port N``: run one broker."""

import sys

from brokernodes import native
from brokernodes.broker_main import main

if __name__ == "__main__":
    if native.installed() is not None:
        # Which hot modules run compiled (SLUICE_NATIVE=1; docs/native-build.md).
        print(native.describe(), file=sys.stderr, flush=True)
    raise SystemExit(main())
