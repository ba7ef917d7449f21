#!/usr/bin/env bash
# The PGXN release: NAME-VERSION.zip (name and version from META.json), one
# top directory NAME-VERSION/ with META.json at its root, holding the files
# git tracks (no .git, no build products; .gitattributes export-ignore drops
# the repository's own plumbing), plus any file META.json names that the
# build generates (the newest version's base script, made by `make` from the
# released script and the upgrade scripts, so that the zip holds what
# META.json promises). META.json is validated against the PGXN meta-spec and
# the zip's own tree (scripts/check_meta_json.py) before the zip is written.
#
#   scripts/pgxn_zip.sh [--worktree] [OUT_DIR]     (`make pgxn-zip` runs it)
#
# By default it packs HEAD and refuses a tree with uncommitted changes to
# tracked files; --worktree packs them too (the package test's use). OUT_DIR
# defaults to build/ (ignored by git), not the top directory, where a zip
# would sit beside dist/, the portable engine's generated scripts, and read
# like part of it. Needs git, python3, and make with pg_config only when a
# named file must be generated.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$PWD

worktree=0
[ "${1:-}" = --worktree ] && { worktree=1; shift; }
out=$(mkdir -p "${1:-$top/build}" && cd "${1:-$top/build}" && pwd)

meta() { python3 -c 'import json, sys; m = json.load(open("META.json")); print(eval(sys.argv[1]))' "$1"; }
name=$(meta 'm["name"]')
version=$(meta 'm["version"]')
dist=$name-$version

ref=HEAD
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  if [ $worktree = 1 ]; then
    ref=$(git stash create)  # a commit of the working tree's tracked files; changes nothing
  else
    echo "pgxn_zip.sh: uncommitted changes; commit them, or pass --worktree" >&2
    exit 1
  fi
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
git archive --format=tar --prefix="$dist/" "$ref" | tar -x -C "$stage"

# Files META.json names that the tree does not hold are build products:
# make them in the staged copy (never in the working tree).
for f in $(meta '"\n".join(v[k] for v in m["provides"].values() for k in ("file", "docfile") if k in v)'); do
  if [ ! -e "$stage/$dist/$f" ]; then
    make -s -C "$stage/$dist" "$f" >/dev/null ||
      { echo "pgxn_zip.sh: META.json names $f, which git does not track and make cannot build" >&2; exit 1; }
    echo "generated $f"
  fi
done

python3 "$stage/$dist/scripts/check_meta_json.py" "$stage/$dist/META.json"

rm -f "$out/$dist.zip"
(cd "$stage" && python3 -m zipfile -c "$out/$dist.zip" "$dist/")
echo "$out/$dist.zip: $(python3 -m zipfile -l "$out/$dist.zip" | tail -n +2 | wc -l) entries, $(stat -c %s "$out/$dist.zip") bytes, from $(git rev-parse --short "$ref")$([ "$ref" = HEAD ] || echo ' (HEAD plus uncommitted changes)')"
