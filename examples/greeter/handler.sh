#!/bin/sh
# Multi-turn: exit 10 asks a question (stdout is the question) and the task waits, input-required,
# for a message naming it (taskId) — its next turn, with MUR_TURN one higher and every earlier
# message of the task in $MUR_TASK_DIR/history.json.
set -eu
text=$(cat)
if [ "$MUR_TURN" = 1 ]; then
    echo "what is your name?"
    exit 10
fi
echo "hello, $text (turn $MUR_TURN)"
