#!/bin/sh
# A peer: the first sentence, at most twelve words.
set -eu
cat | tr '\n' ' ' | sed 's/[.!?].*//' | awk '{ n = NF < 12 ? NF : 12; for (i = 1; i <= n; i++) printf "%s%s", $i, (i < n ? " " : "\n") }'
