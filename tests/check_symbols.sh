#!/bin/sh
# Fails when the shared library exports a defined dynamic symbol that is not tern_*.
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$syms" | grep -v '^tern_' | grep -v '^$')
count=$(printf '%s\n' "$syms" | grep -c '^tern_')
if [ -n "$bad" ]; then
  echo "non-tern symbols exported by $lib:"; printf '%s\n' "$bad" | head -20
  exit 1
fi
echo "$count tern_* symbols exported, nothing else"
