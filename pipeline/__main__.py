"""``python -m pipeline [-m] [overrides]``: see docs/configuration.md.

SIGTERM is handled before the heavy imports (Hydra, MLflow, the retrievers) start, so a command stopped while it
starts says so in one line, like one stopped later (see :mod:`pipeline.common.interrupts`).
"""

import sys

from pipeline.common import interrupts

if __name__ == "__main__":
    interrupts.install()
    try:
        from pipeline.app import main
    except KeyboardInterrupt as exc:
        code, word = interrupts.status(exc)
        print(f"rankscope: stopped by {word} while starting: nothing was done", file=sys.stderr, flush=True)
        sys.exit(code)
    main()
