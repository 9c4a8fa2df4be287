"""The ``stoker`` command of a pip-installed stoker: runs the server binary
the wheel carries (``stoker/_bin/stoker``), replacing this process, so that
``stoker serve ...`` is the binary itself (its signals, its exit status)."""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main() -> int:
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "stoker")
    if not os.access(binary, os.X_OK):
        sys.stderr.write(
            "stoker: this stoker package carries no server binary (it was installed from source, not from a "
            "platform wheel): install the platform wheel (make wheel in a clone; pip install dist/stoker-*.whl), or build the "
            "server with `make build` and run bin/stoker\n")
        return 2
    os.execv(binary, [binary, *sys.argv[1:]])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
