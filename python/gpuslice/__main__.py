"""python3 -m gpuslice green-run ... (what gpuslice green-run runs)."""
import sys

from .cli import main

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "green-run":
        print("usage: python3 -m gpuslice green-run --shares W1,W2,... --task MODULE:FUNC ...",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:]))
