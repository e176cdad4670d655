#!/usr/bin/env bash
# Fails, listing them, when a function of the C ABI (cmake/tern.symbols) is not declared in
# TernLibrary.java, so the Java binding stays complete as the ABI grows. Functions JNA cannot
# express would be listed in `exceptions` below, each with its reason; there are none today.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
symbols="$here/../../cmake/tern.symbols"
lib="$here/src/main/java/tern/TernLibrary.java"
exceptions=(
  # name   # why JNA cannot bind it
)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$symbols" | grep -v '^$' | sort -u > "$tmp/abi"
grep -oE '\btern_[a-z0-9_]+\(' "$lib" | tr -d '(' | sort -u > "$tmp/java"
printf '%s\n' "${exceptions[@]}" | grep -v '^$' | sort -u > "$tmp/except" || true
missing="$(comm -23 "$tmp/abi" "$tmp/java" | comm -23 - "$tmp/except")"
unknown="$(comm -13 "$tmp/abi" "$tmp/java")"
total=$(wc -l < "$tmp/abi")
bound=$(comm -12 "$tmp/abi" "$tmp/java" | wc -l)
echo "Java binding: $bound of $total functions in cmake/tern.symbols bound"
status=0
if [ -n "$missing" ]; then
  echo "missing from TernLibrary.java:"; echo "$missing" | sed 's/^/  /'; status=1
fi
if [ -n "$unknown" ]; then
  echo "declared in TernLibrary.java but not in cmake/tern.symbols:"; echo "$unknown" | sed 's/^/  /'
  status=1
fi
exit $status
