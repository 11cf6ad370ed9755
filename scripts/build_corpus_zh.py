"""Regenerate assets/corpus/zh/ (the Chinese corpus) from offline Debian text.

    python scripts/build_corpus_zh.py [--out assets/corpus/zh]

Needs the Debian packages fortunes-zh, manpages-zh and debian-reference-zh-cn (apt-get install them). The committed
corpus is what the tests, the Chinese corpus search and core.train.pretrain.chinese read; this script is how it was
made. Sentences: runs of text ending in 。！？； with at least 8 Han characters and at most 200 characters,
deduplicated. Held out: sha1(sentence) % 100 < 5. Any sentence that holds an item of the Chinese everyday probe
(tests/data/everyday_probe_zh.tsv, with any accepted answer filled in) is dropped, so the probe is never trained on.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import html
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.data.probe_items import ZH_PROBE_PATH  # noqa: E402
from core.represent.bundled_corpus import ZH_DIR  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")
SOURCES = {  # package: (licence as its copyright file states it, what was read)
    "fortunes-zh": ("GPL-3.0+", "/usr/share/games/fortunes/{chinese,tang300,song100}"),
    "debian-reference-zh-cn": ("GPL-2+", "/usr/share/debian-reference/*.zh-cn.html"),
    "manpages-zh": (
        "GFDL-1.2+ / GPL-2.0+ / BSD-2-Clause / CC0-1.0 / public domain (per page; see the copyright file)",
        "/usr/share/man/zh_CN/man*/*.gz",
    ),
}


def sentences(text: str) -> list[str]:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = re.sub(r"[ \t\u3000]+", " ", text)
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = para.replace("\n", "") if len(HAN.findall(para)) > len(para) / 3 else para.replace("\n", " ")
        for s in re.split(r"(?<=[。！？；])", para):
            s = s.strip(" -%")
            if len(HAN.findall(s)) >= 8 and len(s) <= 200:
                out.append(s)
    return out


def read_sources() -> dict[str, list[str]]:
    docs: dict[str, list[str]] = {}
    for f in ("chinese", "tang300", "song100"):
        t = open(f"/usr/share/games/fortunes/{f}", encoding="utf-8", errors="replace").read()
        docs[f"fortunes-zh/{f}"] = [x for e in t.split("\n%\n") for x in sentences(e)]
    for f in sorted(glob.glob("/usr/share/debian-reference/*.zh-cn.html")):
        t = open(f, encoding="utf-8").read()
        t = re.sub(r"(?s)<(script|style|pre).*?</\1>", "", t)
        t = re.sub(r"<br\s*/?>|</p>|</li>|</div>|</h\d>|</td>", "\n\n", t)
        docs["debian-reference-zh-cn/" + Path(f).name] = sentences(html.unescape(re.sub(r"<[^>]+>", "", t)))
    for f in sorted(glob.glob("/usr/share/man/zh_CN/man*/*.gz")):
        t = gzip.open(f).read().decode("utf-8", "replace")
        lines = [
            re.sub(r"\\f[BIRP]|\\\(..|\\-|\\&|\\e", "", x)
            for x in t.splitlines()
            if not x.startswith(('.\\"', "'\\\""))
        ]
        docs["manpages-zh/" + Path(f).name] = sentences("\n".join("" if x.startswith(".") else x for x in lines))
    return docs


def probe_strings(path: Path) -> list[str]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        sentence, answers = line.split("\t")[:2]
        for a in answers.split("|"):
            out.append(sentence.replace("[MASK]", a).rstrip("。！？，"))
    return out


def split_sentences(docs, probe: list[str]) -> tuple[dict[str, dict[str, list[str]]], int]:
    """Deduplicate (first seen wins), drop sentences that hold a probe string, and split the rest by
    sha1(sentence) % 100 < 5 into held-out and train, per document name; returns the split and the dropped count."""
    seen: set[str] = set()
    split: dict[str, dict[str, list[str]]] = {"train": {}, "heldout": {}}
    dropped = 0
    for doc, sents in docs:
        for s in sents:
            if s in seen:
                continue
            seen.add(s)
            if any(p in s for p in probe):
                dropped += 1
                continue
            part = "heldout" if int(hashlib.sha1(s.encode()).hexdigest(), 16) % 100 < 5 else "train"
            split[part].setdefault(doc, []).append(s)
    return split, dropped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ZH_DIR))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = probe_strings(ZH_PROBE_PATH)
    split, dropped = split_sentences(read_sources().items(), probe)
    manifest: dict = {
        "format": "one sentence per line, blank line between documents",
        "heldout_rule": "sha1(sentence) % 100 < 5",
        "probe_sentences_dropped": dropped,
        "sources": {},
    }
    for part, docs in split.items():
        (out / f"{part}.txt").write_text("\n\n".join("\n".join(v) for v in docs.values()) + "\n", encoding="utf-8")
        for pkg in SOURCES:
            rows = [s for d, v in docs.items() if d.startswith(pkg + "/") for s in v]
            entry = manifest["sources"].setdefault(pkg, {"licence": SOURCES[pkg][0], "read": SOURCES[pkg][1]})
            entry[part] = {"sentences": len(rows), "characters": sum(map(len, rows))}
    for pkg in SOURCES:
        shutil.copy(f"/usr/share/doc/{pkg}/copyright", out / f"LICENSE.{pkg}")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(manifest, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
