"""`search.approximate`: a search's own `ef_search` leaves the graph's
setting as it was for the searches after it."""

import numpy as np

from search import approximate


def test_a_per_call_ef_search_leaves_the_index_at_its_own():
    rng = np.random.default_rng(0)
    encodings = rng.normal(size=(5000, 16)).astype(np.float32)
    queries = rng.normal(size=(40, 16)).astype(np.float32)
    index = approximate.build([encodings[:2500], encodings[2500:]], "cosine")
    before = approximate.search(index, queries, 10, "cosine")
    narrow = approximate.search(index, queries, 10, "cosine", ef_search=1)
    after = approximate.search(index, queries, 10, "cosine")
    assert index.hnsw.efSearch == 256  # approximate.DEFAULT_EF_SEARCH, as built
    # Keeping 10 candidates instead of 256 misses neighbours: another ranking.
    assert not np.array_equal(narrow[1], before[1])
    np.testing.assert_array_equal(after[1], before[1])
    np.testing.assert_array_equal(after[0], before[0])  # the same code path on the same graph
