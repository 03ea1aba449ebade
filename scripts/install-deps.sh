#!/bin/sh
# Makes sure the Debian packages kiln builds against are present. As root it installs
# what is missing; otherwise it prints the exact command and stops. Arguments name more packages
# (`make fuzz`: clang with libFuzzer, llvm-symbolizer).
set -e
PACKAGES="cmake make gcc pkg-config libopenblas-dev libcjson-dev libxxhash-dev libpcre2-dev libutf8proc-dev libpng-dev libdnnl-dev $*"

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = "0" ]; then
  echo "kiln: installing missing packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends $missing >/dev/null
else
  echo "kiln: missing packages:$missing" >&2
  echo "kiln: run:  sudo apt-get install -y$missing" >&2
  exit 1
fi
