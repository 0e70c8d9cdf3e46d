#!/bin/sh
# Mutation testing of the CPU suite: plants each realistic bug of mutants.txt in a copy of the
# source tree, one at a time, and reports whether `ctest` kills it. Not part of `make test` (it
# takes about half an hour on two CPUs). Usage: tests/mutation/run.sh [--list] [--keep]
# [--baseline] [--jobs N] [--mutants FILE] [--hinted-only] [ID...]; see tests/mutation/mutate.py --help.
exec python3 "$(dirname "$0")/mutate.py" "$@"
