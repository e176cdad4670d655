#!/usr/bin/env bash
# Checks that TernLibrary.java declares every function of cmake/tern.symbols (check-symbols.sh),
# compiles the Java binding and its tests with javac against Debian's JNA (libjna-java) and runs
# them; prints "N passed, N failed" and fails when a test failed. The library comes from
# TERN_LIB_DIR (the folder holding libtern.so) when set, else from the installed package.
set -euo pipefail
# A relative TERN_LIB_DIR means the caller's folder.
if [ -n "${TERN_LIB_DIR:-}" ]; then TERN_LIB_DIR="$(cd "$TERN_LIB_DIR" && pwd)"; export TERN_LIB_DIR; fi
cd "$(dirname "$0")"
./check-symbols.sh
jna="${JNA_JAR:-/usr/share/java/jna.jar}"
[ -f "$jna" ] || { echo "JNA not found at $jna (Debian: libjna-java; or set JNA_JAR)"; exit 1; }
out="${TERN_JAVA_BUILD:-build}"
rm -rf "$out"
mkdir -p "$out/classes"
javac -Xlint:all -Werror -d "$out/classes" -cp "$jna" \
  $(find src/main/java src/test/java -name '*.java')
jar cf "$out/tern.jar" -C "$out/classes" tern
exec java -cp "$out/classes:$jna" tern.TernTest
