#!/bin/sh
# Builds llama.cpp's llama-bench from the source vendored in the llama-cpp-python sdist (PyPI),
# as its users build it (CMake, Release, GGML_NATIVE, its default OpenMP), and prints the
# source tree's path: convert_hf_to_gguf.py is there, llama-bench in build/bin/.
#
# Usage: sh bench/build_llama_cpp.sh [DEST]
#   DEST: where the tree goes (default: ${XDG_CACHE_HOME:-~/.cache}/kiln-bench/llama.cpp);
#   kept and reused when llama-bench is already built there.
#   LLAMA_CPP_PYTHON_VERSION pins the sdist (default: the newest on PyPI).
set -eu
DEST=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-bench/llama.cpp}
if [ -x "$DEST/build/bin/llama-bench" ]; then
    echo "$DEST"
    exit 0
fi
VERSION=${LLAMA_CPP_PYTHON_VERSION:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The sdist's address from PyPI's JSON API: `pip download` of an sdist first installs its
# build backend's dependencies from source (minutes, or stuck on a slow mirror) to read metadata
# this script does not need.
python3 - "${VERSION}" "$TMP" >&2 <<'PY'
import json, sys, urllib.parse, urllib.request
version, dest = sys.argv[1], sys.argv[2]
url = "https://pypi.org/pypi/llama-cpp-python/%sjson" % (version + "/" if version else "")
files = json.load(urllib.request.urlopen(url, timeout=60))["urls"]
sdist = next(f for f in files if f["packagetype"] == "sdist")
address = urllib.parse.urljoin(url, sdist["url"])  # a mirror may answer with a relative address
print("llama.cpp: fetching", address)
urllib.request.urlretrieve(address, dest + "/" + sdist["filename"])
PY
tar -xzf "$TMP"/llama_cpp_python-*.tar.gz -C "$TMP"
SRC=$(ls -d "$TMP"/llama_cpp_python-*/vendor/llama.cpp)
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST"
mv "$SRC" "$DEST"
cmake -S "$DEST" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF >&2
cmake --build "$DEST/build" -j "$(nproc)" --target llama-bench >&2
echo "$DEST"
