#!/usr/bin/env bash
# Usage: tools/venv.sh DEST LOCK_FILE layered|link [PIP_ARGS...]  (called by the Makefile)
# Makes DEST with the packages of LOCK_FILE. With VENV_CACHE set (the Makefile's default:
# ~/.cache/vllm-fork/venvs) the packages are installed once into VENV_CACHE/<name>-<key>, the key being the
# sha256 of the lock file, the Python version and the machine, and reused by every later clone on this machine:
#   layered  DEST is a small venv of its own that sees the cached packages through a .pth file; what is
#            installed into DEST (the fork wheel) never reaches the cache.
#   link     DEST is a symlink to the cached venv (for environments nothing is installed into).
# A cached venv counts only once its .complete marker exists (written last, under a lock), so an interrupted
# install is redone, never used. VENV_CACHE= (empty) installs into DEST directly, as on a fresh machine.
set -euo pipefail
dest=$1 lock=$2 mode=$3
shift 3
python=${PYTHON:-python3}
rm -rf "$dest"
if [ -z "${VENV_CACHE:-}" ]; then
  "$python" -m venv "$dest"
  "$dest/bin/pip" install -q "$@" -r "$lock"
  exit 0
fi
key=$({ sha256sum <"$lock"; "$python" -c 'import platform, sys; print(sys.version, platform.machine())'; } \
  | sha256sum | cut -c1-16)
cached="$VENV_CACHE/$(basename "$dest")-$key"
mkdir -p "$VENV_CACHE"
(
  flock 9
  if [ ! -f "$cached/.complete" ]; then
    rm -rf "$cached"
    "$python" -m venv "$cached"
    "$cached/bin/pip" install -q "$@" -r "$lock"
    touch "$cached/.complete"
  fi
) 9>"$cached.lock"
echo "$dest: packages of $lock from $cached"
if [ "$mode" = link ]; then
  ln -sfn "$cached" "$dest"
else  # no pip of its own: `python -m pip` runs the cached one and installs into DEST
  "$python" -m venv --without-pip "$dest"
  purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
  # addsitedir, not a bare path: the cached site-packages' own .pth files (nvidia_cutlass_dsl's) must run too.
  echo "import site; site.addsitedir('$("$cached/bin/python" -c "$purelib")')" \
    >"$("$dest/bin/python" -c "$purelib")/_cached_packages.pth"
  # Native tools (ruff, typos) are found in the venv's own bin; scripts (#!) would run the cached interpreter.
  for tool in "$cached"/bin/*; do
    [ -f "$tool" ] && [ -x "$tool" ] && [ ! -e "$dest/bin/${tool##*/}" ] && [ "$(head -c2 "$tool")" != '#!' ] \
      && ln -s "$tool" "$dest/bin/"
  done
fi
