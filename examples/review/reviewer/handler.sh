#!/bin/sh
# A peer: a crude review — counts words and flags shouting.
set -eu
text=$(cat)
words=$(printf '%s\n' "$text" | wc -w | tr -d ' ')
if printf '%s' "$text" | grep -q '[A-Z][A-Z][A-Z]'; then tone="too loud"; else tone="calm"; fi
printf '%s words, %s\n' "$words" "$tone"
