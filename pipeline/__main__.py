"""``python -m pipeline [-m] [overrides]``: see README.md, "Running experiments"."""

from pipeline.app import main

if __name__ == "__main__":
    main()
