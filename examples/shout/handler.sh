#!/bin/sh
# A complete mur capsule handler: the task's text arrives on stdin; what goes to stdout is the
# answer; a non-zero exit fails the task, with the tail of stderr as the reason.
set -eu

text=$(cat)
if [ -z "$text" ]; then
    echo "shout: nothing to shout (send a task with some text)" >&2
    exit 2
fi

# Control values reach the environment from the next task on (see README, "Control").
prefix=${SHOUT_PREFIX:-}
answer=$(printf '%s' "$text" | tr '[:lower:]' '[:upper:]')
printf '%s%s\n' "${prefix:+$prefix }" "$answer"
if [ -n "${SHOUT_SIGNATURE:-}" ]; then
    printf -- '-- signed (%s)\n' "$MUR_CAPSULE"
fi
