"""The profile cache: a hit skips parsing and validation, an edit is always seen, a bad cache file
is ignored, errors are never cached, and the cache can be turned off or be unwritable."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import pytest

from mi400plan import cache as cache_mod
from mi400plan import profiles as profiles_mod
from mi400plan.errors import ProfileError
from mi400plan.profiles import Catalog

SKU = """name = "testgpu"
display_name = "Test GPU"
vendor = "Test"

[memory]
hbm_capacity_gb = {hbm}
hbm_bandwidth_tb_per_s = 5.0

[compute]
bf16_dense_tflops = 1000
"""


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("MI400PLAN_CACHE_DIR", str(d))
    monkeypatch.delenv("MI400PLAN_NO_CACHE", raising=False)
    return d


def _user_dir(tmp_path: Path, write_profile, hbm: str = "100") -> Path:
    root = tmp_path / "p"
    write_profile(root, "accelerators", "testgpu", SKU.format(hbm=hbm))
    return root


def _no_parsing(monkeypatch) -> None:
    def boom(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("parsed or validated although the cache holds this text")

    monkeypatch.setattr(profiles_mod, "parse_toml", boom)
    monkeypatch.setattr(profiles_mod, "validate_dict", boom)


def test_second_run_reads_parsed_and_validated_profiles_from_the_cache(cache_dir, tmp_path, write_profile, monkeypatch):
    root = _user_dir(tmp_path, write_profile)
    first = Catalog.default([root]).get("accelerators", "testgpu").spec
    assert len(list(cache_dir.glob("profiles-*/*.pickle"))) >= 1
    _no_parsing(monkeypatch)
    second = Catalog.default([root]).get("accelerators", "testgpu").spec
    assert second == first
    assert second.memory.capacity_bytes.nominal == 100e9


def test_a_warm_index_reads_only_the_heads(cache_dir, tmp_path, write_profile, monkeypatch):
    """Listing and resolving names on a warm cache unpickles each profile's small head (name, aliases,
    top-level strings), never its whole parsed table; a profile that is then validated reads its spec
    from the cache, so no parsed table is read at all."""
    root = _user_dir(tmp_path, write_profile)
    cold = Catalog.default([root])
    names = cold.names("accelerators")
    racks_for_mi355x = cold.names_with("racks", "sku", "mi355x")
    cold.get("accelerators", "testgpu")

    def no_table(self, text, parse):  # noqa: ANN001, ANN202
        raise AssertionError("a whole parsed table was read for indexing")

    monkeypatch.setattr(cache_mod.ProfileCache, "parsed", no_table)
    warm = Catalog.default([root])
    assert warm.names("accelerators") == names and "testgpu" in names
    assert warm.names_with("racks", "sku", "mi355x") == racks_for_mi355x and racks_for_mi355x
    assert warm.get("accelerators", "testgpu").spec.memory.capacity_bytes.nominal == 100e9


def test_an_edited_profile_is_seen(cache_dir, tmp_path, write_profile):
    root = _user_dir(tmp_path, write_profile, hbm="100")
    assert Catalog.default([root]).get("accelerators", "testgpu").spec.memory.capacity_bytes.nominal == 100e9
    _user_dir(tmp_path, write_profile, hbm="150")
    assert Catalog.default([root]).get("accelerators", "testgpu").spec.memory.capacity_bytes.nominal == 150e9


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "wrong-types", "bad-pickles"])
def test_a_damaged_cache_file_is_ignored(cache_dir, tmp_path, write_profile, damage):
    root = _user_dir(tmp_path, write_profile)
    Catalog.default([root]).get("accelerators", "testgpu")
    text = SKU.format(hbm="100")
    (path,) = cache_dir.glob(f"profiles-*/{cache_mod.text_key(text)}.pickle")
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        path.write_bytes(blob[:-10] + bytes(b ^ 0xFF for b in blob[-10:]))
    elif damage == "garbage":
        path.write_bytes(b"not a cache at all")
    else:  # a well-formed, checksummed file whose entries hold the wrong types, or unreadable pickles
        bad = {"raw": "not a dict", "spec:accelerators": "not a spec"}
        if damage == "bad-pickles":
            bad = {"raw": b"\x80junk", "spec:accelerators": pickle.dumps("not a spec")}
        payload = pickle.dumps(bad)
        path.write_bytes(cache_mod._MAGIC + hashlib.sha256(payload).digest() + payload)
    spec = Catalog.default([root]).get("accelerators", "testgpu").spec
    assert spec.memory.capacity_bytes.nominal == 100e9


def test_validation_errors_are_never_cached(cache_dir, tmp_path, write_profile):
    root = tmp_path / "p"
    write_profile(root, "accelerators", "testgpu", SKU.format(hbm='"lots"'))
    for _ in range(2):
        with pytest.raises(ProfileError):
            Catalog.default([root]).get("accelerators", "testgpu")


def test_no_cache_env_writes_nothing(cache_dir, tmp_path, write_profile, monkeypatch):
    monkeypatch.setenv("MI400PLAN_NO_CACHE", "1")
    root = _user_dir(tmp_path, write_profile)
    Catalog.default([root]).get("accelerators", "testgpu")
    assert not cache_dir.exists()


def test_an_unwritable_cache_location_is_not_an_error(tmp_path, write_profile, monkeypatch):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("MI400PLAN_CACHE_DIR", str(blocker / "cache"))
    root = _user_dir(tmp_path, write_profile)
    assert Catalog.default([root]).get("accelerators", "testgpu").spec.name == "testgpu"


def test_the_fit_command_gives_the_same_answer_cold_and_warm(cache_dir, cli):
    args = ["fit", "llama3.1-70b", "--sku", "all", "--json"]
    cold = cli(args).stdout
    assert list(cache_dir.glob("profiles-*/*.pickle"))
    assert cli(args).stdout == cold


def test_an_oversized_text_is_never_cached(cache_dir, tmp_path, write_profile):
    """A profile over the text bound (here a 2 MiB description) is read and validated each time but
    never written to the cache, so it can neither fill the disk nor slow later commands."""
    root = tmp_path / "p"
    huge = SKU.format(hbm="100").replace('vendor = "Test"', f'vendor = "Test"\ndescription = "{"x" * (2 << 20)}"')
    write_profile(root, "accelerators", "testgpu", huge)
    assert Catalog.default([root]).get("accelerators", "testgpu").spec.memory.capacity_bytes.nominal == 100e9
    assert not list(cache_dir.glob(f"profiles-*/{cache_mod.text_key(huge)}.pickle"))
    assert sum(f.stat().st_size for f in cache_dir.rglob("*") if f.is_file()) < 2 << 20


def test_the_cache_keeps_its_entry_and_byte_bounds_least_recently_used_out(cache_dir, monkeypatch):
    """Past MAX_ENTRIES files (or MAX_BYTES), a write removes the oldest entries by last use; the
    single-file cache of earlier versions is removed too."""
    import os

    monkeypatch.setattr(cache_mod, "MAX_ENTRIES", 3)
    cache_dir.mkdir(parents=True)
    (cache_dir / "profiles-0123456789abcdef.pickle").write_bytes(b"x" * 1000)
    c = cache_mod.ProfileCache(cache_dir)
    for i in range(5):
        c.parsed(f"t{i}", lambda: {"i": 1})
        c.flush()
        f = c.path / f"{cache_mod.text_key(f't{i}')}.pickle"
        os.utime(f, (1000 + i, 1000 + i))  # t0 is the least recently used
    left = sorted(p.name for p in c.path.glob("*.pickle"))
    assert left == sorted(f"{cache_mod.text_key(f't{i}')}.pickle" for i in (2, 3, 4))
    assert not list(cache_dir.glob("profiles-*.pickle"))
    monkeypatch.setattr(cache_mod, "MAX_BYTES", 1)  # every file is over: a write leaves none but what fits
    c.parsed("t9", lambda: {"i": 1})
    c.flush()
    assert list(c.path.glob("*.pickle")) == []


def test_a_lookup_reads_only_its_own_entry(cache_dir, tmp_path, write_profile, monkeypatch):
    """Many unrelated entries on disk do not change what a lookup opens: one file, its own."""
    root = _user_dir(tmp_path, write_profile)
    Catalog.default([root]).get("accelerators", "testgpu")
    c = cache_mod.ProfileCache(cache_dir)
    for i in range(50):
        c.parsed(f"unrelated {i}", lambda: {"i": 1})
    c.flush()
    opened = []
    real = cache_mod._read
    monkeypatch.setattr(cache_mod, "_read", lambda p: opened.append(p.name) or real(p))
    text = SKU.format(hbm="100")
    warm = cache_mod.ProfileCache(cache_dir)
    assert warm.parsed(text, lambda: {})["vendor"] == "Test"
    assert opened == [f"{cache_mod.text_key(text)}.pickle"]


def test_a_directory_indexed_again_reads_one_entry_and_still_sees_edits(cache_dir, tmp_path, write_profile,
                                                                        monkeypatch):
    """Indexing a kind reads one cache entry per profile directory (the heads of all its files together, keyed
    by their texts), not one per file; an edited file changes that key, so the edit is seen."""
    root = _user_dir(tmp_path, write_profile)
    for i in range(5):
        write_profile(root, "accelerators", f"other{i}", SKU.format(hbm="100").replace('"testgpu"', f'"other{i}"'))
    assert "other3" in Catalog.default([root]).names("accelerators")  # first run: fills the cache
    opened = []
    real = cache_mod._read
    with monkeypatch.context() as m:
        m.setattr(cache_mod, "_read", lambda p: opened.append(p.name) or real(p))
        _no_parsing(m)
        names = Catalog.default([root]).names("accelerators")
    assert {"testgpu", "other0", "other4", "mi300x"} <= set(names)
    assert len(opened) == 2  # the user directory's entry and the bundled directory's, not one per profile
    write_profile(root, "accelerators", "other3", SKU.format(hbm="100").replace('"testgpu"', '"renamed3"'))
    names = Catalog.default([root]).names("accelerators")
    assert "renamed3" in names and "other3" not in names
