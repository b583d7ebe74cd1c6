#!/bin/sh
# Put Tailor in this user's application menu: the icons (hicolor theme) and tailor.desktop, whose
# Exec points at the bundle's executable. Usage: install-desktop-entry.sh [BUNDLE_DIR]
# BUNDLE_DIR defaults to the folder this script is in (it is copied into dist/tailor/ by the build).
# Undo: rm ~/.local/share/applications/tailor.desktop ~/.local/share/icons/hicolor/*/apps/tailor.*
set -eu
bundle=$(cd "${1:-$(dirname "$0")}" && pwd)
exe="$bundle/tailor"
assets="$bundle/_internal/assets"
if [ ! -x "$exe" ] || [ ! -f "$assets/tailor.desktop" ]; then
    echo "install-desktop-entry: $bundle is not a Tailor bundle (build one with: make package)" >&2
    exit 1
fi
data="${XDG_DATA_HOME:-$HOME/.local/share}"
for size in 16 24 32 48 64 128 256 512; do
    mkdir -p "$data/icons/hicolor/${size}x${size}/apps"
    cp "$assets/icons/tailor-$size.png" "$data/icons/hicolor/${size}x${size}/apps/tailor.png"
done
mkdir -p "$data/icons/hicolor/scalable/apps" "$data/applications"
cp "$assets/tailor.svg" "$data/icons/hicolor/scalable/apps/tailor.svg"
# Quoted, so a bundle under a folder with spaces still starts (Desktop Entry spec, "Exec key").
sed "s|^Exec=.*|Exec=\"$exe\"|" "$assets/tailor.desktop" > "$data/applications/tailor.desktop"
# Menus pick the entry up by themselves; these only refresh caches, where the tools exist.
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$data/applications" || true
command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$data/icons/hicolor" || true
echo "Installed $data/applications/tailor.desktop -> $exe"
