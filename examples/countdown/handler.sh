#!/bin/sh
# Streaming: every line the handler writes reaches a streaming client (message/stream,
# SendStreamingMessage) or `mur run --task` as it is written, not when the handler ends.
set -eu
cat >/dev/null
for n in 3 2 1; do
    echo "$n"
    sleep 0.5
done
echo "liftoff"
