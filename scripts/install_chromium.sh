#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the end-to-end tests (Playwright drives /usr/bin/chromium; it never
# downloads a browser of its own), and a CJK font (fonts-noto-cjk) for 中文: without one, Chromium, kaleido's
# report PNGs and the e2e glyph check draw every Chinese character as an empty box. Installs only what is missing;
# silent when everything is there.
set -euo pipefail
need=()
if [ ! -x /usr/bin/chromium ]; then need+=(chromium chromium-driver); fi
if ! command -v fc-list >/dev/null 2>&1 || [ -z "$(fc-list :lang=zh family 2>/dev/null)" ]; then
    need+=(fonts-noto-cjk)
fi
if [ "${#need[@]}" -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
