"""WordNet through NLTK, found offline.

Search order: NLTK's own data path (``nltk.download("wordnet")``); else Debian's
``wordnet-base`` + ``wordnet-sense-index`` folder (``/usr/share/wordnet``), made readable for
NLTK by a cache folder of links plus the ``lexnames`` file NLTK needs and Debian lacks; else a
:class:`WordNetNotFound` error that says what to install.
"""

from __future__ import annotations

import os
import shutil
import warnings
from functools import lru_cache
from pathlib import Path

from lightning_metrics.atomic import atomic_path, write_text
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.storage.cache import cache_dir

DEBIAN_DIR = Path("/usr/share/wordnet")

# WordNet 3.0's lexicographer files (lexnames(5WN)): number, name, syntactic category.
LEXNAMES = (
    "adj.all 3|adj.pert 3|adv.all 4|noun.Tops 1|noun.act 1|noun.animal 1|noun.artifact 1|noun.attribute 1|"
    "noun.body 1|noun.cognition 1|noun.communication 1|noun.event 1|noun.feeling 1|noun.food 1|noun.group 1|"
    "noun.location 1|noun.motive 1|noun.object 1|noun.person 1|noun.phenomenon 1|noun.plant 1|noun.possession 1|"
    "noun.process 1|noun.quantity 1|noun.relation 1|noun.shape 1|noun.state 1|noun.substance 1|noun.time 1|"
    "verb.body 2|verb.change 2|verb.cognition 2|verb.communication 2|verb.competition 2|verb.consumption 2|"
    "verb.contact 2|verb.creation 2|verb.emotion 2|verb.motion 2|verb.perception 2|verb.possession 2|"
    "verb.social 2|verb.stative 2|verb.weather 2|adj.ppl 3"
).split("|")


class WordNetNotFound(LightningMetricsError):
    """No WordNet data anywhere this module looks."""


def _debian_as_nltk_data(source: Path) -> Path:
    """Build ``<cache>/nltk_data/corpora/wordnet`` from Debian's folder plus a ``lexnames`` file.

    Files are copied once (about 35 MB): NLTK's reader refuses symlinks and hard links that
    could point outside its root."""
    root = cache_dir() / "nltk_data"
    target = root / "corpora" / "wordnet"
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        link = target / item.name
        if item.is_file() and not link.exists():
            with atomic_path(link) as tmp:
                shutil.copyfile(item, tmp)
    lexnames = target / "lexnames"
    if not lexnames.exists():
        write_text(lexnames, "".join(f"{i:02d}\t{entry.replace(' ', chr(9))}\n" for i, entry in enumerate(LEXNAMES)))
    return root


def load_wordnet():
    """The NLTK WordNet reader, from NLTK's data path or Debian's packages (see module doc).

    Loaded once per process tree: a forked worker keeps the parsed indexes but reopens the data
    files, since a file offset shared between processes would garble concurrent reads."""
    reader = _load_wordnet()
    if getattr(reader, "_lm_pid", None) != os.getpid():
        reader._data_file_map = {}  # NLTK's cache of open data files; reopened lazily
        reader._lm_pid = os.getpid()
    return reader


@lru_cache(maxsize=1)
def _load_wordnet():
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    tried = []
    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError:
        tried.append("NLTK data path (no corpora/wordnet)")
        if not (DEBIAN_DIR / "data.noun").is_file():
            tried.append(f"{DEBIAN_DIR} (absent)")
            raise WordNetNotFound(
                "WordNet not found; tried: "
                + "; ".join(tried)
                + ". Install it with `apt-get install wordnet-base wordnet-sense-index` or "
                "`python -m nltk.downloader wordnet`"
            ) from None
        data_root = _debian_as_nltk_data(DEBIAN_DIR)
        if str(data_root) not in nltk.data.path:
            nltk.data.path.append(str(data_root))  # NLTK's reader refuses paths off its data path
        root = nltk.data.find("corpora/wordnet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": we need none
        return WordNetCorpusReader(root, None)


def example_sentences(min_words: int = 5, max_words: int = 30) -> list[str]:
    """The usage examples WordNet ships in its glosses, as capitalised sentences (file order).

    This is the embedded default corpus: it comes with the WordNet data, so nothing is copied
    into the project. The list is cached as a text file in :func:`cache_dir`.
    """
    cached = cache_dir() / f"wordnet_examples_{min_words}_{max_words}.txt"
    if cached.is_file():
        return cached.read_text(encoding="utf-8").splitlines()
    wn = load_wordnet()
    seen: dict[str, None] = {}
    for pos in ("n", "v", "a", "r"):
        for synset in wn.all_synsets(pos):
            for example in synset.examples():
                text = " ".join(example.replace("`", "").split()).strip(" ;,")
                n_words = len(text.split())
                if min_words <= n_words <= max_words and text[:1].isalpha():
                    text = text[0].upper() + text[1:]
                    if text[-1] not in ".!?":
                        text += "."
                    seen.setdefault(text, None)
    write_text(cached, "".join(f"{line}\n" for line in seen))
    return list(seen)
