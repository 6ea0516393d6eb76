"""The random JSON editor the schema fast-path tests use must not share inserted values."""

from hypothesis import given, settings
from hypothesis import strategies as st
from json_mutation import mutate, paths


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_inserted_values_are_copies_so_no_cycle_and_no_leak_between_examples(data):
    """st.just/sampled_from give the same object each draw: inserting it as is once put a dict inside
    itself (RecursionError in paths, CI of 04482ee) and carried edits into later examples."""
    shared = {"k": 1}
    doc = {"a": {"b": 1}, "c": [1, 2]}
    mutate(doc, data, st.just(shared), ["n"])
    assert shared == {"k": 1}
    assert len(paths(doc)) < 30
