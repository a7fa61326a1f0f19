#!/bin/sh
# The entry member: asks the reviewer and the summarizer about the task's text and combines their
# answers. "$MUR formation call PEER TEXT" goes through this session; no token or address here.
set -eu
text=$(cat)
review=$(printf '%s' "$text" | "$MUR" formation call reviewer -)
summary=$(printf '%s' "$text" | "$MUR" formation call summarizer -)
printf 'review: %s\nsummary: %s\n' "$review" "$summary"
