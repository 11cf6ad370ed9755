"""Build EncoderLab's bundled token-classification sample: assets/data/tokens/{train,test}.conll.

Short everyday sentences with PER / LOC / ORG / DATE entities in IOB2, made from this file's own templates and
name lists (written for the project, CC0: no third-party text). Seeded, so a rebuild gives the same files:

    python scripts/build_token_sample.py            # 240 train / 60 held-out sentences, seed 0

Each template fills slots with names drawn from the lists; multi-word names get B- then I- tags. The held-out
sentences use the same templates and lists but other draws, so some names in them were never seen in training.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "assets" / "data" / "tokens"

FIRST = [
    "Anna",
    "Tomasz",
    "Mei",
    "Oluwaseun",
    "Ingrid",
    "Rafael",
    "Priya",
    "Jonas",
    "Aiko",
    "Kwame",
    "Sofia",
    "Dmitri",
    "Leila",
    "Mateo",
    "Hannah",
    "Arjun",
    "Chloe",
    "Bartholomew",
    "Yusuf",
    "Greta",
    "Nikolai",
    "Beatriz",
    "Samuel",
    "Fatima",
    "Lars",
    "Amara",
    "Henrik",
    "Valentina",
    "Kenji",
    "Zofia",
]
LAST = [
    "Kowalczyk",
    "Okonkwo",
    "Lindqvist",
    "Fernandes",
    "Nakamura",
    "Achterberg",
    "Patel",
    "Moreau",
    "Schwarzenegger",
    "Mensah",
    "Rossi",
    "Ivanova",
    "Haddad",
    "Brennan",
    "Oyelaran",
    "Gustafsson",
    "Vasquez",
    "Thorvaldsen",
    "Abernathy",
    "Castellanos",
]
PLACES = [
    "Lisbon",
    "Krakow",
    "Nairobi",
    "Osaka",
    "Reykjavik",
    "Montevideo",
    "Edinburgh",
    "Ljubljana",
    "Hanoi",
    "Winnipeg",
    "New York",
    "Buenos Aires",
    "San Sebastian",
    "Kuala Lumpur",
    "Cape Town",
    "Rio de Janeiro",
    "Tasmania",
    "Patagonia",
    "Bavaria",
    "the Alps",
    "Norway",
    "Ghana",
    "Peru",
    "Vietnam",
]
ORGS = [
    "Northwind Bakery",
    "the Riverside Library",
    "Bluefin Labs",
    "Harbor Hospital",
    "Greenleaf Cooperative",
    "the city council",
    "Maple Street School",
    "Orion Airlines",
    "Copperfield Bank",
    "the Starlight Theatre",
    "Pinecrest University",
    "Atlas Logistics",
    "the Hilltop Choir",
    "Sunrise Radio",
    "Quillon Software",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# {PER} a person, {LOC} a place, {ORG} an organisation, {DATE} a date; the rest of the words are tagged O.
TEMPLATES = [
    "{PER} flew to {LOC} on {DATE} .",
    "{PER} works at {ORG} in {LOC} .",
    "On {DATE} , {PER} met {PER} at {ORG} .",
    "{ORG} opened a new office in {LOC} on {DATE} .",
    "My neighbour {PER} moved to {LOC} last year .",
    "{PER} and {PER} visited {LOC} in {DATE} .",
    "The meeting with {ORG} is on {DATE} .",
    "{PER} has been a teacher at {ORG} since {DATE} .",
    "We drove from {LOC} to {LOC} with {PER} .",
    "{ORG} hired {PER} as its new director .",
    "I called {PER} about the trip to {LOC} .",
    "The concert by {ORG} in {LOC} was sold out .",
    "{PER} was born in {LOC} on {DATE} .",
    "Tickets for {ORG} go on sale on {DATE} .",
    "Ask {PER} at the front desk of {ORG} .",
    "It rained all week in {LOC} .",
    "{PER} sent the report to {ORG} on {DATE} .",
    "The bus to {LOC} leaves every {DATE} .",
    "After lunch {PER} walked along the river in {LOC} .",
    "{ORG} and {ORG} signed the agreement on {DATE} .",
    "Our cousin {PER} studies at {ORG} .",
    "{PER} cooked dinner for everyone on {DATE} .",
    "The parcel from {LOC} arrived on {DATE} .",
    "She thanked {PER} for the photos of {LOC} .",
    "Nobody at {ORG} knew where {PER} had gone .",
]


def date(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(DAYS)
    if kind == 1:
        return rng.choice(MONTHS)
    if kind == 2:
        return f"{rng.randint(1, 28)} {rng.choice(MONTHS)}"
    return f"{rng.choice(MONTHS)} {rng.randint(1990, 2025)}"


def fill(slot: str, rng: random.Random) -> str:
    if slot == "PER":
        r = rng.random()
        return (
            rng.choice(FIRST) if r < 0.3 else rng.choice(LAST) if r < 0.4 else f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        )
    if slot == "LOC":
        return rng.choice(PLACES)
    if slot == "ORG":
        return rng.choice(ORGS)
    return date(rng)


def sentence(template: str, rng: random.Random) -> list[tuple[str, str]]:
    out = []
    for part in template.split():
        if part.startswith("{") and part.endswith("}"):
            slot = part[1:-1]
            words = fill(slot, rng).split()
            # "the" starting a place or organisation name belongs to the text, not the entity (CoNLL's habit)
            if words[0] == "the":
                out.append(("the", "O"))
                words = words[1:]
            out += [(w, ("B-" if i == 0 else "I-") + slot) for i, w in enumerate(words)]
        else:
            out.append((part, "O"))
    if out and out[0][1] == "O":  # capitalise a sentence that starts with a plain word
        out[0] = (out[0][0][:1].upper() + out[0][0][1:], "O")
    return out


def build(n_train: int = 240, n_test: int = 60, seed: int = 0, out: Path = OUT) -> Path:
    rng = random.Random(seed)
    seen: set[str] = set()
    sents: list[list[tuple[str, str]]] = []
    while len(sents) < n_train + n_test:
        s = sentence(
            TEMPLATES[len(sents) % len(TEMPLATES)] if len(sents) < len(TEMPLATES) else rng.choice(TEMPLATES), rng
        )
        key = " ".join(w for w, _ in s)
        if key not in seen:  # no sentence in both splits
            seen.add(key)
            sents.append(s)
    rng.shuffle(sents)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", sents[:n_train]), ("test", sents[n_train:])):
        (out / f"{name}.conll").write_text("\n\n".join("\n".join(f"{w} {t}" for w, t in s) for s in part) + "\n")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, default=240)
    ap.add_argument("--test", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(build(a.train, a.test, a.seed))
