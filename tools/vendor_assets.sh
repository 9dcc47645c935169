#!/usr/bin/env bash
# Vendor the JavaScript the exported report needs so the pages load nothing from a CDN at view time:
#   requirejs@2.3.8                        -> kit/report/_vendor/require.js
#   @jupyter-widgets/html-manager@1.0.15   -> kit/report/_vendor/embed-amd.js (+ the icon fonts it references)
# Fetched once from the npm registry with `npm pack` (integrity checked by npm) into the gitignored
# kit/report/_vendor/. Idempotent: a second run with the same versions only checks the stamp file.
set -euo pipefail

REQUIREJS_VERSION="2.3.8"
HTML_MANAGER_VERSION="1.0.15"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/kit/report/_vendor"
STAMP="$DEST/VERSIONS"
WANT="requirejs@${REQUIREJS_VERSION} @jupyter-widgets/html-manager@${HTML_MANAGER_VERSION}"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -s "$DEST/require.js" ] && [ -s "$DEST/embed-amd.js" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "vendor_assets: npm not found; install it (apt-get install npm, or 'make system-deps' as root) to vendor $WANT" >&2
  exit 1
fi

echo "vendor_assets: fetching $WANT with npm pack" >&2
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent "requirejs@${REQUIREJS_VERSION}" "@jupyter-widgets/html-manager@${HTML_MANAGER_VERSION}" >/dev/null) || {
  echo "vendor_assets: 'npm pack $WANT' failed (is the npm registry reachable?)" >&2
  exit 1
}
mkdir -p "$WORK/rjs" "$WORK/hm" "$WORK/out"
tar -xzf "$WORK/requirejs-${REQUIREJS_VERSION}.tgz" -C "$WORK/rjs"
tar -xzf "$WORK/jupyter-widgets-html-manager-${HTML_MANAGER_VERSION}.tgz" -C "$WORK/hm"

cp "$WORK/rjs/package/require.js" "$WORK/out/require.js"
cp "$WORK/rjs/package/LICENSE" "$WORK/out/LICENSE.requirejs" 2>/dev/null || true
cp "$WORK/hm/package/dist/embed-amd.js" "$WORK/out/embed-amd.js"
cp "$WORK/hm/package/dist/embed.js.LICENSE.txt" "$WORK/out/LICENSE.html-manager-bundle.txt"
cp "$WORK/hm/package/LICENSE" "$WORK/out/LICENSE.html-manager" 2>/dev/null || true
# Icon fonts (font-awesome) the widget CSS in embed-amd.js references by relative URL.
for f in "$WORK"/hm/package/dist/*.{woff2,woff,ttf,eot,svg}; do
  [ -e "$f" ] && cp "$f" "$WORK/out/"
done
echo "$WANT" > "$WORK/out/VERSIONS"

# Swap in atomically enough: build beside, then replace.
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.new"
mv "$WORK/out" "$DEST.new"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
echo "vendor_assets: wrote $(du -sh "$DEST" | cut -f1) to kit/report/_vendor/" >&2
