"""Layer probes: the task builders on a small corpus, the probe trainer on a planted synthetic stack, the control
task, and run_probes on tiny models of the four families."""

from __future__ import annotations

import numpy as np
import pytest

from app.kit.exports import probes_csv
from core.represent import probe_tasks as PT
from core.represent import probes as P
from core.represent.bundled_corpus import corpus_sentences
from core.represent.token_vectors import WORD_RE

COORD = [
    "The sun rose over the quiet hills, and the birds began to sing.",
    "My brother bought a new red car, and he drove it home.",
    "Some say the road is long, and I believe them all.",
]
_LEFT = [
    "The old man walked to the market",
    "Our small garden grew tall beans",
    "A cold wind blew across the bay",
    "The children played in the yard",
    "Her letter arrived on a Monday",
]
_RIGHT = [
    "the dogs slept by the door",
    "he smiled at the strangers",
    "it rained for three days",
    "they sang a long song",
    "we waited for the bus",
]
MORE_COORD = [f"{a}, and {b}." for a in _LEFT for b in _RIGHT]  # 25 distinct "X, and Y." sentences


@pytest.fixture(scope="module")
def pool() -> tuple[str, ...]:
    """The bundled corpus's held-out split (about 2k sentences) plus a few "X, and Y." sentences."""
    return PT.prepare_corpus(list(corpus_sentences("heldout")) + COORD + MORE_COORD)


@pytest.fixture(scope="module")
def tasks(pool):
    return {t.name: t for t in P.build_tasks(P.ProbeConfig(per_task=200), pool)}


def test_labels_are_balanced_and_split_both_ways(tasks):
    for name, task in tasks.items():
        counts = np.bincount(task.labels)
        assert len(counts) == len(task.label_names) >= 2 and counts.min() == counts.max(), (name, counts)
        assert 0.1 < task.heldout.mean() < 0.35, name
        for c in range(len(task.label_names)):  # every label on both sides of the split
            assert task.heldout[task.labels == c].any() and (~task.heldout[task.labels == c]).any(), (name, c)
    assert len(tasks["length"].label_names) == PT.LENGTH_BINS
    lengths = [len(s.split()) for s in tasks["length"].sentences]
    by_bin = [np.mean([n for n, y in zip(lengths, tasks["length"].labels) if y == b]) for b in range(PT.LENGTH_BINS)]
    assert by_bin == sorted(by_bin)  # bins are in length order


def test_bigram_shift_swaps_exactly_two_adjacent_words(tasks):
    task = tasks["bigram_shift"]
    for s, o, y in zip(task.sentences, task.originals, task.labels):
        a, b = s.split(), o.split()
        diff = [i for i, (x, z) in enumerate(zip(a, b)) if x != z]
        if y == 0:
            assert s == o
        else:
            assert len(a) == len(b) and len(diff) == 2 and diff[1] == diff[0] + 1, (o, s)
            i = diff[0]
            assert (a[i], a[i + 1]) == (b[i + 1], b[i])


def test_coordination_inversion_finds_and_swaps_the_clauses(tasks):
    assert PT.coordination(COORD[0]) == ("The sun rose over the quiet hills", "the birds began to sing", ".")
    lower = PT.lower_vocab(COORD + ["He saw the sun."])
    assert PT.coord_invert(COORD[0], lower) == "The birds began to sing, and the sun rose over the quiet hills."
    assert PT.coord_invert(COORD[2], lower) == "I believe them all, and some say the road is long."
    for no in (
        "He ran, and fell down hard.",
        "Red, green, and blue are colours.",
        "A cat, and then a dog ran.",
        "And the man went out, and the dog followed him.",
    ):
        assert PT.coordination(no) is None, no
    task = tasks["coord_inversion"]
    assert task.found >= 3  # the planted three at least, and the corpus's own
    for s, o, y in zip(task.sentences, task.originals, task.labels):
        assert PT.coordination(o) is not None
        assert (s == o) == (y == 0)
        if y:
            x, rest, _ = PT.coordination(o)
            assert s.lower().startswith(rest.lower()) and x.lower() in s.lower()


def test_odd_word_replaces_one_word_from_its_frequency_band(pool, tasks):
    bands = PT.frequency_bands(pool)
    task = tasks["odd_word"]
    for s, o, y in zip(task.sentences, task.originals, task.labels):
        diff = [(x, z) for x, z in zip(s.split(), o.split()) if x != z]
        assert len(diff) == (1 if y else 0), (o, s)
        if y:
            new, old = diff[0]
            assert bands[new] == bands[old]


def test_control_labels_are_per_word_type(tasks):
    task = tasks["suffix"]
    assert task.unit == "word" and task.control is not None
    per_type: dict[str, set] = {}
    for w, c, y in zip(task.types, task.control, task.labels):
        per_type.setdefault(w, set()).add(int(c))
        assert PT.suffix_class(w) == y
    assert all(len(v) == 1 for v in per_type.values())  # one control label per type
    assert len({next(iter(v)) for v in per_type.values()}) == len(PT.SUFFIX_CLASSES)  # and not one label for all
    assert len(per_type) < len(task)  # types recur, so memorising can score on the control task
    words = [list(WORD_RE.finditer(task.sentences[s]))[w].group().lower() for s, w in task.words]
    assert words == list(task.types)  # (sentence, word) points at the word


def test_same_seed_same_tasks_other_seed_other_sample(pool):
    a = P.build_tasks(P.ProbeConfig(tasks=("bigram_shift",), per_task=100), pool)[0]
    b = P.build_tasks(P.ProbeConfig(tasks=("bigram_shift",), per_task=100), pool)[0]
    c = P.build_tasks(P.ProbeConfig(tasks=("bigram_shift",), per_task=100, seed=1), pool)[0]
    assert a.sentences == b.sentences and (a.labels == b.labels).all() and a.sentences != c.sentences


@pytest.mark.parametrize("k", [0, 2, 4])
def test_planted_property_peaks_at_its_depth(k):
    """A synthetic stack of 5 depths: only depth k carries the label (a direction plus noise); the rest is noise
    with the same scale. The probe's best depth must be k, well above the others."""
    rng = np.random.default_rng(k)
    n, depths, h = 400, 5, 16
    labels = rng.integers(0, 2, n)
    feats = rng.normal(size=(depths, n, h))
    direction = rng.normal(size=h)
    feats[k] += 1.5 * np.outer(2 * labels - 1, direction / np.linalg.norm(direction))
    held = np.zeros(n, dtype=bool)
    held[rng.permutation(n)[:100]] = True
    acc = P.fit_probes(feats, labels, held)
    assert int(np.argmax(acc)) == k
    assert acc[k] > 0.85 and max(a for d, a in enumerate(acc) if d != k) < 0.7


def test_control_task_exposes_a_memorising_representation():
    """Vectors that only identify the word type score on the real task and the control task alike (selectivity
    about 0); vectors that carry the property itself, and not the type, score on the real task only."""
    rng = np.random.default_rng(0)
    n_types, per_type, h = 60, 6, 64
    types = np.repeat(np.arange(n_types), per_type)
    real = types % 3  # a property of the type
    control = rng.integers(0, 3, n_types)[types]  # a random label per type
    identity = rng.normal(size=(n_types, h))[types] + 0.3 * rng.normal(size=(len(types), h))
    prop = np.eye(3, h)[real] * 3 + rng.normal(size=(len(types), h))
    held = np.tile(np.arange(per_type) == 0, n_types)  # one token of each type held out: seen types
    for feats, lo, hi in ((identity, -0.15, 0.15), (prop, 0.4, 1.0)):
        acc = P.fit_probes(feats[None], real, held)[0]
        ctl = P.fit_probes(feats[None], control, held)[0]
        assert lo <= acc - ctl <= hi, (acc, ctl)


def test_config_and_corpus_messages():
    with pytest.raises(ValueError, match="Unknown task"):
        P.ProbeConfig(tasks=("length", "pos"))
    with pytest.raises(ValueError, match="at least one task"):
        P.ProbeConfig(tasks=())
    with pytest.raises(ValueError, match="per task must be"):
        P.ProbeConfig(per_task=5)
    with pytest.raises(ValueError, match="empty"):
        PT.corpus_from_text("  \n ")
    with pytest.raises(ValueError, match="no sentence of 4 to 60 words"):
        P.ProbeConfig(corpus=("Too short.", "Me too.")).sentences()
    with pytest.raises(ValueError, match="not UTF-8"):
        PT.corpus_from_upload("Le café est très bon pour nous.".encode("latin-1"), "notes.txt")
    with pytest.raises(ValueError, match="binary"):
        PT.corpus_from_upload(b"\x00\x01\x02PK\x03\x04" * 50, "model.bin")
    with pytest.raises(ValueError, match="takes uploads up to 20 MB"):
        PT.corpus_from_upload(b"a b c d.\n" * (51 * 2**20 // 9), "big.txt")
    with pytest.raises(ValueError, match='at least 20 sentences of the form "X, and Y."; this corpus gives 1\\.'):
        P.build_tasks(P.ProbeConfig(tasks=("coord_inversion",), corpus=tuple(COORD[:1] + ["One two three four."] * 9)))


def test_run_probes_on_tiny_models(tiny_models, family, pool, tmp_path, monkeypatch):
    from core.models.loading import ModelSpec, load

    lm = load(ModelSpec(family, str(tiny_models[family])), task="base")
    cfg = P.ProbeConfig(tasks=("length", "bigram_shift", "suffix"), per_task=40, corpus=pool[:600], max_length=64)
    seen = []
    res = P.run_probes(lm, cfg, on_progress=lambda f, m: seen.append(f))
    depths = 3  # tiny models: embeddings + 2 layers
    assert res.num_depths == depths and [s.task for s in res.scores] == list(cfg.tasks)
    for s in res.scores:
        assert len(s.accuracy) == depths and all(0 <= a <= 1 for a in s.accuracy)
        assert 0 <= s.best_depth < depths and s.n_train > s.n_heldout > 0
    word = res.score("suffix")
    assert len(word.control) == len(word.selectivity) == depths
    assert np.allclose(word.selectivity, np.subtract(word.accuracy, word.control))
    assert res.score("length").majority == pytest.approx(0.2, abs=0.05) and res.score("length").control is None
    assert seen[-1] == 1.0 and seen == sorted(seen)
    csv = probes_csv(res).splitlines()
    assert csv[0].startswith("task,depth,accuracy,majority,control,selectivity") and len(csv) == 1 + 3 * depths
    if family == "bert":  # saving and loading again
        monkeypatch.setenv("ENCODERLAB_PROBES_DIR", str(tmp_path))
        assert P.saved_result(lm, cfg) is None
        P.save_result(lm, cfg, res)
        assert P.saved_result(lm, cfg) == res
        assert P.saved_result(lm, P.ProbeConfig(tasks=cfg.tasks, per_task=61, corpus=cfg.corpus)) is None
        assert str(tmp_path) not in res.to_json()


# ---------------------------------------------------------------------------------------------- #46 §5, 10 and 15
ZH_LINES = "\n".join(corpus_sentences("heldout", "zh")[:600])  # pasted Chinese: one sentence per line, no spaces


def test_pasted_chinese_lines_are_counted_in_words_and_probed():
    """Chinese has no spaces between words: a line was one 'word' and every line was refused ('no sentence of 4 to
    60 words'). Words are jieba's 词 now: the lines are accepted, and the tasks that work on Chinese build."""
    assert PT.word_count("我们的项目需要更多的人。") == 8 and PT.word_count("The cat sat down.") == 4
    assert PT.corpus_from_text("今天下了一场大雨。所以地面还是湿的！\nOne more line here.") == [
        "今天下了一场大雨。",
        "所以地面还是湿的！",
        "One more line here.",
    ]
    pool = P.ProbeConfig(corpus=tuple(PT.corpus_from_text(ZH_LINES))).sentences()
    assert len(pool) > 500
    cfg = P.ProbeConfig(tasks=("length", "bigram_shift", "odd_word"), per_task=200)
    built = {t.name: t for t in P.build_tasks(cfg, pool)}
    assert all(len(t) >= 150 for t in built.values()), {n: len(t) for n, t in built.items()}
    for name in ("bigram_shift", "odd_word"):  # an edited sentence differs from its original
        t = built[name]
        edited = [(o, s) for o, s, y in zip(t.originals, t.sentences, t.labels) if y == 1]
        assert edited and all(o != s for o, s in edited), name
        if name == "bigram_shift":  # the same characters, two words swapped
            assert all(sorted(o) == sorted(s) for o, s in edited)
    swapped = PT.bigram_shift("我们需要更多的人。", np.random.default_rng(0))
    assert sorted(swapped) == sorted("我们需要更多的人。") and swapped != "我们需要更多的人。"


def test_english_grammar_tasks_say_plainly_they_cannot_read_chinese():
    pool = P.ProbeConfig(corpus=tuple(PT.corpus_from_text(ZH_LINES))).sentences()
    for task in PT.ENGLISH_ONLY:
        with pytest.raises(ValueError, match="cannot be built from Chinese text") as e:
            P.build_tasks(P.ProbeConfig(tasks=("length", task)), pool)
        assert e.value.kind == "probes.english_only"


def test_every_too_few_message_exists_in_both_languages():
    from core.base.messages import templates

    for task in PT.TASKS:
        entry = templates()[f"probes.too_few.{task}"]
        assert "{have}" in entry["en"] and "{have}" in entry["zh"] and "sentences" not in entry["zh"]
