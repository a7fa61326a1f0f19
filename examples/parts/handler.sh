#!/bin/sh
# Parts: stdin holds only the text parts; $MUR_TASK_DIR/message.json holds every part (text, data,
# raw, url) in the A2A 1.0 shape. Files left in $MUR_TASK_DIR/out/ come back as parts of the
# answer: *.json with valid JSON as a data part, anything else as a raw part with its name.
set -eu
cat >/dev/null
message="$MUR_TASK_DIR/message.json"
cp "$message" "$MUR_TASK_DIR/out/received.json"
printf 'message.json was %s bytes\n' "$(wc -c <"$message" | tr -d ' ')" >"$MUR_TASK_DIR/out/note.txt"
echo "your message came back as received.json, with a note"
