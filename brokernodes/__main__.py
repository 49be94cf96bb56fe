"""``python -m brokernodes --config metadata.json --data-dir DIR --port N``: run one broker."""

from brokernodes.broker_main import main

if __name__ == "__main__":
    raise SystemExit(main())
