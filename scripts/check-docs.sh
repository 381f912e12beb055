#!/usr/bin/env bash
# What the docs quote that the code defines, checked on the source tree (a ctest,
# check_docs, runs this):
#  - every statement of the plugin ABI version in docs/*.md, README.md and
#    bench/README.md ("ABI version N", "ABI N", "TROUPE_ABI_VERSION is N") names
#    TROUPE_ABI_VERSION of include/troupe/plugin.hpp. A phrase may break over lines.
#    One exception, by rule: the number after "built for troupe plugin ABI version"
#    is the plugin's own in the loader's refusal message (plugin_host/loader.cpp),
#    quoted as an example of a plugin built for another version. Write a history of
#    the bumps without the word "ABI" before the number ("bump 13", "version 13").
#  - docs/architecture.md (the map) and every other docs/*.md stay at most 400 lines;
#  - every relative markdown link in those files points at a file that exists
#    (fenced code blocks and `inline code` are skipped; #anchors are not checked).
# Prints every mismatch and exits 1 if there is any; "docs: ok" otherwise.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 1
status=0
fail() {
  echo "docs: $*"
  status=1
}

max_lines=400
files=(README.md bench/README.md docs/*.md)

abi=$(sed -nE 's/^#define TROUPE_ABI_VERSION ([0-9]+)u?[[:space:]]*$/\1/p' include/troupe/plugin.hpp)
if [[ -z $abi ]]; then
  echo "docs: cannot read '#define TROUPE_ABI_VERSION N' from include/troupe/plugin.hpp"
  exit 1
fi

# The ABI version the docs quote.
for f in "${files[@]}"; do
  # One line per file, so that a phrase broken over lines still matches.
  text=$(tr '\n' ' ' <"$f" | tr -s ' ')
  quotes=$(grep -oE '(built for troupe plugin )?ABI( version)? [0-9]+|TROUPE_ABI_VERSION`?( is| =|:)? [0-9]+' <<<"$text" |
           grep -v '^built for troupe plugin ')
  while read -r quote; do
    [[ -z $quote ]] && continue
    n=${quote##* }
    [[ $n == "$abi" ]] && continue
    # The lines that hold the number after an ABI (or the line after one that ends in "ABI").
    where=$(awk -v n="$n" '
      { hit = ($0 ~ ("(^|[^0-9])" n "([^0-9]|$)")) }
      hit && (/ABI/ || prev_abi) { print NR }
      { prev_abi = /ABI( version)?[[:space:]]*$/ }' "$f" | paste -sd, -)
    fail "$f${where:+:$where} says \"$quote\", but include/troupe/plugin.hpp defines TROUPE_ABI_VERSION $abi" \
         "(write the current version as \"ABI version $abi\"; a past bump without the word ABI before its number)"
  done <<<"$quotes"
done

# The length of the docs pages.
for f in docs/*.md; do
  n=$(wc -l <"$f")
  if ((n > max_lines)); then
    what="a topic file"
    [[ $f == docs/architecture.md ]] && what="the map"
    fail "$f has $n lines; $what stays at most $max_lines (move reference to a topic file, or split the topic)"
  fi
done

# Relative links.
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  broken=$(awk '
    /^[[:space:]]*```/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      while (match(line, /\]\([^) \t]+\)/)) {
        print NR "\t" substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$f" |
    while IFS=$'\t' read -r ln target; do
      case $target in http://* | https://* | mailto:* | \#*) continue ;; esac
      path=${target%%#*}
      [[ -e $dir/$path ]] || echo "$f:$ln links to $target, which does not exist"
    done)
  if [[ -n $broken ]]; then
    while read -r line; do fail "$line"; done <<<"$broken"
  fi
done

if ((status == 0)); then echo "docs: ok (ABI version $abi, ${#files[@]} files)"; fi
exit $status
