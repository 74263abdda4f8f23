"""Matching graphs across sides and naming the components of a cache key that changed."""

from __future__ import annotations

from compilewatch.bot.judge.cachediff import collapse, diff_cache
from compilewatch.core.schema import Cache, CacheKey
from tests.factories import BASE_COMPONENTS, cache_key


def _g(**changes: str) -> dict[str, str]:
    return {**BASE_COMPONENTS, **changes}


def test_identical_caches_have_no_changes():
    assert diff_cache(Cache(fx=[cache_key(_g())]), Cache(fx=[cache_key(_g())])) == []


def test_changed_added_and_removed_components():
    base = _g(**{"inductor_config[old_flag]": "o1"})
    head = _g(gm="new-graph", **{"inductor_config[new_flag]": "n1"})
    (ch,) = diff_cache(Cache(fx=[cache_key(base)]), Cache(fx=[cache_key(head)]))
    assert ch.status == "changed" and ch.changed == ["gm"]
    assert ch.added == ["inductor_config[new_flag]"] and ch.removed == ["inductor_config[old_flag]"]


def test_a_graph_added_in_the_middle_does_not_shift_later_pairs():
    a, b = _g(gm="graph-a"), _g(gm="graph-b")
    split = _g(gm="graph-a2")
    changes = diff_cache(Cache(fx=[cache_key(a), cache_key(b)]),
                         Cache(fx=[cache_key(a), cache_key(split), cache_key(b)]))
    assert [(c.status, c.index) for c in changes] == [("added", 1)]


def test_only_cold_phase_keys_are_compared():
    warm = cache_key(_g(gm="other"), phase="warm")
    assert diff_cache(Cache(fx=[cache_key(_g())]), Cache(fx=[cache_key(_g()), warm])) == []


def test_hundreds_of_config_changes_collapse_to_one_entry():
    names = [f"inductor_config[flag_{i}]" for i in range(300)] + ["torch_version"]
    assert collapse(names) == ["inductor_config[…] ×300", "torch_version"]
    assert collapse(["example_inputs[0]", "example_inputs[1]"]) == [
        "example_inputs[0]", "example_inputs[1]"]
    base = {f"inductor_config[flag_{i}]": "a" for i in range(300)}
    head = {f"inductor_config[flag_{i}]": "b" for i in range(300)}
    (ch,) = diff_cache(Cache(aot=[cache_key(base, kind="aot")]),
                       Cache(aot=[cache_key(head, kind="aot")]))
    assert len(ch.changed) == 300 and ch.summary == ["inductor_config[…] ×300"]


def test_changed_components_carry_their_readable_values_and_graphs_added_are_not_components():
    from compilewatch.bot.render.filters import cache_items, cache_label

    b = CacheKey(key="fa", components={"gm": "g1", "example_inputs[0]": "e1"},
                 values={"example_inputs[0]": "float32[128, 128] stride=(128, 1) cuda"})
    h = CacheKey(key="fb", components={"gm": "g1", "example_inputs[0]": "e2"},
                 values={"example_inputs[0]": "float32[96, 96] stride=(96, 1) cuda"})
    extra = CacheKey(key="fc", components={"gm": "g2"})
    [changed, added] = diff_cache(Cache(fx=[b]), Cache(fx=[h, extra]))
    assert changed.values == {"example_inputs[0]": [
        "float32[128, 128] stride=(128, 1) cuda", "float32[96, 96] stride=(96, 1) cuda"]}
    assert added.status == "added"
    items = cache_items([changed, added])
    assert items == ["example_inputs[0]: float32[128, 128] stride=(128, 1) cuda → "
                     "float32[96, 96] stride=(96, 1) cuda"]
    assert str(cache_label([changed, added])) == "cache: 1 key changed, 1 graph added"
    long = CacheKey(key="fd", components={"gm": "g3"}, values={"gm": "x" * 500})
    assert "gm" not in diff_cache(Cache(fx=[b]), Cache(fx=[long]))[0].values  # too long


def _bypassed(reason: str = "Can't cache HigherOrderOperator: cond") -> CacheKey:
    return CacheKey(key="unkeyed", state="bypass", bypass_reason=reason)


def test_a_graph_head_no_longer_keys_is_bypassed_with_torch_s_reason_not_its_components_gone():
    (ch,) = diff_cache(Cache(fx=[cache_key(_g())]), Cache(fx=[_bypassed()]))
    assert ch.status == "bypassed" and ch.reason == "Can't cache HigherOrderOperator: cond"
    assert ch.removed == [] and ch.changed == [] and ch.head_key is None
    (back,) = diff_cache(Cache(fx=[_bypassed()]), Cache(fx=[cache_key(_g())]))
    assert back.status == "cached again" and back.base_key is None


def test_a_graph_bypassed_on_both_sides_is_no_change_whatever_its_reason():
    assert diff_cache(Cache(aot=[_bypassed("a")]), Cache(aot=[_bypassed("b")])) == []


def test_a_bypass_without_a_reason_says_torch_gave_none():
    (ch,) = diff_cache(Cache(aot=[cache_key(_g(), kind="aot")]),
                       Cache(aot=[CacheKey(key="unkeyed", state="bypass")]))
    assert ch.kind == "aot" and ch.reason == "torch gave no reason"
