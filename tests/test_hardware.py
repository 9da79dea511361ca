"""Hardware facts load, resolve aliases and carry sources."""

import pytest

from nkieval.hardware import UnknownTargetError, all_targets, get_target, resolve_target_name


@pytest.mark.parametrize(("alias", "name"), [("trn1", "trn1"), ("inf2", "trn1"), ("gen2", "trn1"), ("gen3", "trn2"),
                                             ("TRN3", "trn3"), (4, "trn3")])
def test_aliases(alias, name):
    assert resolve_target_name(alias) == name


def test_env_override(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")
    assert get_target().name == "trn3"


def test_unknown_target_names_known_ones():
    with pytest.raises(UnknownTargetError, match=r"unknown target 'trn9'.*gen3"):
        get_target("trn9")


def test_every_fact_has_source_and_status():
    for t in all_targets().values():
        for f in t.facts.values():
            assert f.source, (t.name, f.name)
            assert f.status in {"documented", "derived", "assumed", "fitted"}, (t.name, f.name, f.status)


def test_generation_facts_differ_where_documented():
    t1, t2, t3 = (get_target(n) for n in ("trn1", "trn2", "trn3"))
    assert (t1.sbuf_bytes_per_partition, t2.sbuf_bytes_per_partition, t3.sbuf_bytes_per_partition) == (
        192 * 1024, 224 * 1024, 256 * 1024)
    assert t1.psum_bytes_per_partition == t1.psum_banks * t1.psum_bank_bytes == 16 * 1024
    assert not t1.has("double_row") and t2.has("double_row") and t3.has("mx") and not t2.has("mx")
    assert t3.gemm_moving_fmax > t2.gemm_moving_fmax == 512
    with pytest.raises(KeyError):
        t1.has("warp_drive")
