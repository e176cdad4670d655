#!/bin/sh
# The shared library's exported symbols are exactly the list in the repository (cmake/tern.symbols),
# which is exactly the functions the public header declares:
# - a defined dynamic symbol that is not tern_* fails (internals leaking through the version script);
# - a listed symbol the library lacks fails (a removal or rename breaks every program built
#   against the old header: bump TERN_ABI_VERSION and update the list on purpose);
# - an exported or declared tern_* function missing from the list fails (add it to the list).
# Usage: check_symbols.sh LIBTERN.so SYMBOL_LIST C_API_HEADER
set -eu
lib="$1" list="$2" header="$3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${NM:-nm}" -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | grep -v '^$' | sort -u > "$tmp/all"
grep -v '^tern_' "$tmp/all" > "$tmp/foreign" || true
grep '^tern_' "$tmp/all" > "$tmp/exported" || true
grep -v '^#' "$list" | grep -v '^$' | sort -u > "$tmp/listed"
# Declarations: `TERN_API <type> tern_name(` in the header.
grep -v '^#' "$header" | grep -o 'TERN_API[^(;]*(' | sed -E 's/.*[^a-z0-9_](tern_[a-z0-9_]+)\($/\1/' | sort -u > "$tmp/declared"
fail=0
report() {  # FILE MESSAGE
  if [ -s "$1" ]; then echo "$2:"; sed 's/^/  /' "$1" | head -40; fail=1; fi
}
report "$tmp/foreign" "exported symbols that are not tern_* functions"
comm -23 "$tmp/listed" "$tmp/exported" > "$tmp/removed"
report "$tmp/removed" "listed in $list but not exported (removed or renamed: an ABI break)"
comm -13 "$tmp/listed" "$tmp/exported" > "$tmp/added"
report "$tmp/added" "exported but not in $list (add new functions to the list)"
comm -23 "$tmp/declared" "$tmp/listed" > "$tmp/undeclared_list"
report "$tmp/undeclared_list" "declared in the header but not in $list"
comm -13 "$tmp/declared" "$tmp/listed" > "$tmp/unlisted_decl"
report "$tmp/unlisted_decl" "in $list but not declared in the header"
if [ "$fail" -ne 0 ]; then exit 1; fi
echo "$(wc -l < "$tmp/exported") tern_* symbols exported, all listed in $(basename "$list") and declared in $(basename "$header"); nothing else exported"
